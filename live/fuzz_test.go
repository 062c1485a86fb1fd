package live

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/crypt"
)

// Fuzz targets for everything a subscriber parses off NATS. The seed
// corpora are in testdata/fuzz, among them a file for each of
// internal/livetest's forgeries but the 256 KiB one; `go test` runs them
// as tests.

// testRunID is a Temporal run ID, a UUID.
const testRunID = "0196f0d2-7b5e-7c3a-9d2e-1f2a3b4c5d6e"

// checkAccepted fails the test unless env is an event a subscriber of s1
// may be handed.
func checkAccepted(t *testing.T, env keel.Envelope) {
	t.Helper()
	if err := Check("s1", env); err != nil {
		t.Fatalf("accepted an envelope that fails Check: %v", err)
	}
	if bytes.ContainsAny(env.Data, "\r\n") {
		t.Fatalf("accepted data with a line break: %q", env.Data)
	}
	out, err := json.Marshal(env)
	if err != nil {
		t.Fatalf("accepted envelope does not encode: %v", err)
	}
	if bytes.ContainsAny(out, "\r\n") {
		t.Fatalf("accepted envelope encodes with a line break: %q", out)
	}
}

// FuzzReceive feeds a message body and a Keel-Live header to a plaintext
// subscriber's and an encrypting subscriber's checks: neither may panic,
// and whatever either accepts is an ephemeral event of its session.
func FuzzReceive(f *testing.F) {
	codec := crypt.NewCodec(crypt.NewKeyring("k1", bytes.Repeat([]byte{1}, crypt.KeySize)))
	enc := &NATS{opts: NATSOptions{Prefix: DefaultPrefix, MaxEventBytes: DefaultMaxEventBytes, Encryption: codec}}
	good, _ := json.Marshal(keel.Envelope{Type: keel.TypeTextDelta, SessionID: "s1", RunID: keel.RunID("s1", 1),
		At: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), AfterSeq: 7, Data: []byte(`{"step":1,"text":"1"}`)})
	f.Add(good, "A 1")
	if m, err := enc.encode(outMsg{subject: Subject(DefaultPrefix, "s1"), data: good, counter: "A 2"}); err == nil {
		f.Add(m.Data, "")
	}
	plainSub := &natsSub{c: &NATS{opts: NATSOptions{Prefix: DefaultPrefix, MaxEventBytes: DefaultMaxEventBytes}}, session: "s1"}
	encSub := &natsSub{c: enc, session: "s1"}
	f.Fuzz(func(t *testing.T, data []byte, counter string) {
		for _, s := range []*natsSub{plainSub, encSub} {
			o, err := s.open(received{data: data, counter: counter})
			if err != nil {
				if _, ok := err.(*RejectError); !ok {
					t.Fatalf("open's error %T is not a *RejectError", err)
				}
				continue
			}
			checkAccepted(t, o.env)
			if o.counts && (o.n == 0 || o.stream == "" || len(o.stream) > maxStreamID) {
				t.Fatalf("accepted counter %q %d", o.stream, o.n)
			}
		}
	})
}

// FuzzParseCancelNotice feeds bytes to the cancel notice parser: what it
// accepts is a well-formed notice that survives a round trip.
func FuzzParseCancelNotice(f *testing.F) {
	f.Add([]byte(`{"workflow_id":"s1/run-2","run_id":"` + testRunID + `"}`))
	f.Add([]byte(`{"workflow_id":"keel-runtime","run_id":"` + testRunID + `"}`))
	f.Add([]byte(`{"workflow_id":"s1\nx","run_id":"r-1"}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, data []byte) {
		n, err := ParseCancelNotice(data)
		if err != nil {
			return
		}
		if len(data) > MaxCancelNoticeBytes {
			t.Fatalf("accepted %d bytes", len(data))
		}
		if err := n.Validate(); err != nil {
			t.Fatalf("accepted a notice that fails Validate: %v", err)
		}
		b, _ := json.Marshal(n)
		again, err := ParseCancelNotice(b)
		if err != nil || again != n {
			t.Fatalf("round trip of %+v: %+v, %v", n, again, err)
		}
	})
}
