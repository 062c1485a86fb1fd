package keel_test

import (
	"encoding/json"
	"testing"

	"github.com/keelrun/keel"
)

// Whatever bytes arrive as an event envelope (from the live channel, a
// query answer, a segment in the content store), decoding either fails
// or yields an envelope whose event decodes without panicking and whose
// JSON reads back to the same envelope.
func FuzzEnvelope(f *testing.F) {
	for _, seed := range []string{
		`{"seq":1,"type":"run.started","session_id":"s","run_id":"s/run-1","at":"2026-12-01T00:00:00Z","data":{"number":1}}`,
		`{"type":"text.delta","session_id":"s","run_id":"s/run-1","after_seq":3,"data":{"step":1,"attempt":1,"text":"hi"}}`,
		`{"type":"x\nid: 1\ndata: {\"forged\":1}","session_id":"b1"}`,
		`{"seq":-1,"type":"run.completed","data":null}`,
		`{"type":"tool.finished","data":{"tool_call_id":"c","status":"weird","output":"\u0000"}}`,
		`[]`, `null`, `{"data":"not an object"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var env keel.Envelope
		if err := json.Unmarshal(b, &env); err != nil {
			return
		}
		_, _ = env.Event()
		_ = env.Durable()
		_ = env.Terminal()
		_ = env.Size()
		out, err := json.Marshal(env)
		if err != nil {
			// Only data that is not JSON fails to marshal.
			if json.Valid(env.Data) || len(env.Data) == 0 {
				t.Fatalf("an envelope that decoded does not encode: %v", err)
			}
			return
		}
		var again keel.Envelope
		if err := json.Unmarshal(out, &again); err != nil {
			t.Fatalf("an envelope's own JSON does not decode: %v\n%s", err, out)
		}
		if again.Seq != env.Seq || again.Type != env.Type || again.SessionID != env.SessionID || again.RunID != env.RunID {
			t.Fatalf("round trip changed the envelope: %+v -> %+v", env, again)
		}
	})
}
