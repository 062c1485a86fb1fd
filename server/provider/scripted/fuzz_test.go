package scripted

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/provider"
)

// FuzzParse feeds Parse arbitrary bytes, as a script file in a worker's
// scripts directory may hold: it never panics, a script it accepts is
// checked (turns, each with text or tool calls, known failure kinds),
// survives a round trip through JSON, and plays every turn without
// panicking.
func FuzzParse(f *testing.F) {
	f.Add(demoJSON)
	f.Add([]byte(okScript))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data)
		if err != nil {
			return
		}
		if err := s.check(); err != nil {
			t.Fatalf("Parse accepted a script its check refuses: %v", err)
		}
		again, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		if _, err := Parse(again); err != nil {
			t.Fatalf("the script does not parse again: %v\n%s", err, again)
		}
		// Play each turn's success (and its first failure) with no delays.
		s.ChunkDelay = 0
		for i := range s.Turns {
			s.Turns[i].ChunkDelay = nil
		}
		p := New(s)
		for i, turn := range s.Turns {
			msgs := []keel.Message{keel.UserMessage("go")}
			for range i {
				msgs = append(msgs, keel.Message{Role: keel.RoleAssistant, Content: "done"})
			}
			attempts := []int{len(turn.Failures) + 1}
			if len(turn.Failures) > 0 && turn.Failures[0].Kind != FaultHang {
				attempts = append(attempts, 1)
			}
			for _, attempt := range attempts {
				var asm provider.Assembler
				for c, err := range p.Stream(context.Background(), provider.Request{Messages: msgs, Attempt: attempt}) {
					if err != nil {
						break
					}
					asm.Add(c)
				}
				_, _ = asm.Response()
			}
		}
	})
}
