package live_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/internal/livetest"
	"github.com/keelrun/keel/live"
)

// A subscriber refuses every forgery, each for its reason, and accepts
// keel's own events of every ephemeral type.
func TestCheckRefusesForgedEnvelopes(t *testing.T) {
	for _, f := range livetest.Forgeries(t) {
		t.Run(f.Name, func(t *testing.T) {
			_, err := live.DecodeEnvelope("s1", []byte(f.Raw), live.DefaultMaxEventBytes)
			var re *live.RejectError
			if !errors.As(err, &re) || re.Reason != f.Reason {
				t.Fatalf("decodeEnvelope = %v, want a %s rejection", err, f.Reason)
			}
			if !errors.Is(err, keel.ErrInvalidInput) {
				t.Errorf("%v is not a keel.ErrInvalidInput", err)
			}
			if strings.ContainsAny(err.Error(), "\r\n") {
				t.Errorf("the error repeats the message's line breaks: %q", err)
			}
		})
	}
	for _, ev := range []keel.Event{
		keel.TextDelta{Step: 1, Text: "hi"},
		keel.ReasoningDelta{Step: 2, Attempt: 1, Text: "hm"},
		keel.ToolCallDelta{Step: 1, Index: 0, ID: "c1", Name: "read_file", Arguments: `{"pa`},
		keel.ToolProgress{ToolCallID: "c1", Message: "50%"},
	} {
		env, err := keel.Seal(ev, "s1", keel.RunID("s1", 12), livetest.Delta("s1", 1).At)
		if err != nil {
			t.Fatal(err)
		}
		if err := live.Check("s1", env); err != nil {
			t.Errorf("Check(%s) = %v", env.Type, err)
		}
	}
}

// A publisher in the same process cannot hand subscribers a forged
// envelope either: Memory's Publish refuses it, typed, and nothing is
// delivered.
func TestMemoryRefusesForgedEnvelopes(t *testing.T) {
	m := live.NewMemory()
	defer m.Close()
	sub := livetest.Subscribe(t, m, "s1", 0)
	for _, f := range livetest.Forgeries(t) {
		var env keel.Envelope
		if json.Unmarshal([]byte(f.Raw), &env) != nil {
			continue // not an envelope at all: nothing to hand Publish
		}
		if env.SessionID != "s1" && keel.ValidateSessionID(env.SessionID) == nil {
			continue // published to s2's subscribers, who see a valid s2 event
		}
		err := m.Publish(t.Context(), env)
		if !errors.Is(err, keel.ErrInvalidInput) {
			t.Errorf("%s: Publish = %v, want ErrInvalidInput", f.Name, err)
		}
	}
	livetest.Publish(t, m, "s1", 1, 1)
	livetest.Expect(t, sub, livetest.Events(1, 1))
	livetest.ExpectNothing(t, sub)
}

// Cancel notices that are not well formed never reach a listener (the
// NATS channel's test is in server/e2e/live).
func TestMemoryCancelNoticesRefuseForgeries(t *testing.T) {
	m := live.NewMemory()
	got := make(chan live.CancelNotice, 16)
	stop, _ := m.OnCancel(func(n live.CancelNotice) { got <- n })
	defer stop()
	for _, n := range livetest.BadCancelNotices() {
		if err := m.NotifyCancel(n); !errors.Is(err, keel.ErrInvalidInput) {
			t.Errorf("NotifyCancel(%+v) = %v, want ErrInvalidInput", n, err)
		}
	}
	good := livetest.GoodCancelNotices()
	for _, n := range good {
		if err := m.NotifyCancel(n); err != nil {
			t.Errorf("NotifyCancel(%+v) = %v", n, err)
		}
	}
	for _, want := range good {
		if n := livetest.Wait(t, got, "a notice"); n != want {
			t.Errorf("listener got %+v, want %+v", n, want)
		}
	}
}

// ParseCancelNotice takes what NotifyCancel sends.
func TestParseCancelNoticeRoundTrip(t *testing.T) {
	want := live.CancelNotice{WorkflowID: "s-1_a/run-37", RunID: livetest.TestRunID}
	b, _ := json.Marshal(want)
	got, err := live.ParseCancelNotice(b)
	if err != nil || got != want {
		t.Fatalf("ParseCancelNotice(%s) = %+v, %v", b, got, err)
	}
	if _, err := live.ParseCancelNotice(bytes.Repeat([]byte(" "), live.MaxCancelNoticeBytes+1)); err == nil {
		t.Error("an oversized notice parsed")
	}
}
