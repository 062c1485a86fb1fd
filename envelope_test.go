package keel_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/keelrun/keel"
)

func TestEnvelopeRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	events := []keel.Event{
		keel.RunStarted{Number: 2, Revision: 5, Prompt: "hi", Model: "scripted:demo"},
		keel.ToolFinished{ToolCallID: "c1", Name: "read_file", Status: keel.ToolOK, Output: "x", Duration: keel.Duration(1500 * time.Millisecond)},
		keel.ProviderRequestRetry{Step: 1, Attempt: 2, Kind: keel.ProviderRateLimited, Status: 429, Delay: keel.Duration(3 * time.Second)},
		keel.HostedToolActivity{Step: 1, Attempt: 2, Name: "web_search", ID: "ws_1", Query: "keel", URLs: []string{"https://example.com/"}},
		keel.RunFailed{Code: keel.CodeMaxSteps, Message: "too many", Revision: 6},
		keel.TextDelta{Step: 1, Attempt: 1, Text: "Hel"},
	}
	for _, ev := range events {
		env, err := keel.Seal(ev, "s1", "s1/run-2", at)
		if err != nil {
			t.Fatal(err)
		}
		env.Seq = 7
		b, err := json.Marshal(env)
		if err != nil {
			t.Fatal(err)
		}
		var back keel.Envelope
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		got, err := back.Event()
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(ev, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", ev.EventType(), diff)
		}
		if back.Type != ev.EventType() || back.SessionID != "s1" || back.RunID != "s1/run-2" || !back.At.Equal(at) {
			t.Errorf("envelope fields lost: %+v", back)
		}
	}
}

func TestEnvelopeWireShape(t *testing.T) {
	env, err := keel.Seal(keel.StepStarted{Step: 3, EstimatedContextTokens: 120}, "s", "s/run-1",
		time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	env.Seq = 9
	b, _ := json.Marshal(env)
	want := `{"seq":9,"type":"step.started","session_id":"s","run_id":"s/run-1","at":"2026-01-02T03:04:05Z",` +
		`"data":{"step":3,"estimated_context_tokens":120}}`
	if string(b) != want {
		t.Errorf("wire shape\n got %s\nwant %s", b, want)
	}
}

// A type this version does not know, including the two names keel once
// declared and never emitted, decodes to keel.Unknown with its data kept
// (docs/contract.md §1.1).
func TestUnknownEventIsKept(t *testing.T) {
	for _, typ := range []string{"future.thing", "tool.updated", "steering.delivered"} {
		env := keel.Envelope{Type: typ, Data: json.RawMessage(`{"a":1}`)}
		ev, err := env.Event()
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		u, ok := ev.(keel.Unknown)
		if !ok || u.Type != typ || string(u.Data) != `{"a":1}` {
			t.Errorf("%s: got %#v", typ, ev)
		}
	}
}

func TestTerminal(t *testing.T) {
	for typ, want := range map[string]bool{
		keel.TypeRunCompleted: true, keel.TypeRunCancelled: true, keel.TypeRunFailed: true,
		keel.TypeStepStarted: false, keel.TypeTextDelta: false,
	} {
		if got := (keel.Envelope{Type: typ}).Terminal(); got != want {
			t.Errorf("%s terminal = %v", typ, got)
		}
	}
}

func TestValidateSessionID(t *testing.T) {
	for _, ok := range []string{"a", "s-1_B", "X9"} {
		if err := keel.ValidateSessionID(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	long := make([]byte, keel.MaxIDLength+1)
	for i := range long {
		long[i] = 'a'
	}
	for _, bad := range []string{"", "a b", "a/b", "a.b", "é", string(long)} {
		if err := keel.ValidateSessionID(bad); !errors.Is(err, keel.ErrInvalidInput) {
			t.Errorf("%q: want ErrInvalidInput, got %v", bad, err)
		}
	}
}

func TestDurationJSON(t *testing.T) {
	b, _ := json.Marshal(keel.Duration(1500 * time.Millisecond))
	if string(b) != `"1.5s"` {
		t.Errorf("got %s", b)
	}
	for in, want := range map[string]time.Duration{`"250ms"`: 250 * time.Millisecond, `1500`: 1500 * time.Millisecond} {
		var d keel.Duration
		if err := json.Unmarshal([]byte(in), &d); err != nil || d.Std() != want {
			t.Errorf("%s: got %v, %v", in, d, err)
		}
	}
	var d keel.Duration
	if err := json.Unmarshal([]byte(`"soon"`), &d); err == nil {
		t.Error("a bad duration must be an error")
	}
}
