package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/keelrun/keel"
)

func TestAnswerFor(t *testing.T) {
	approval := json.RawMessage(`{"type":"object","properties":{"approved":{"type":"boolean"},"reason":{"type":"string"}},"required":["approved"]}`)
	for _, tc := range []struct {
		name   string
		schema json.RawMessage
		line   string
		want   string
	}{
		{"free text", nil, "hello there", `"hello there"`},
		{"JSON as is", nil, ` {"a": 1} `, `{"a": 1}`},
		{"number", json.RawMessage(`{"type":"integer"}`), "3", `3`},
		{"string schema keeps digits a string", json.RawMessage(`{"type":"string"}`), "42", `"42"`},
		{"string schema keeps JSON text a string", json.RawMessage(`{"type":"string"}`), `{"x":1}`, `"{\"x\":1}"`},
		{"approval y", approval, "y", `{"approved":true}`},
		{"approval Yes", approval, " Yes ", `{"approved":true}`},
		{"approval n", approval, "n", `{"approved":false}`},
		{"approval NO", approval, "NO", `{"approved":false}`},
		{"approval object", approval, `{"approved":false,"reason":"not now"}`, `{"approved":false,"reason":"not now"}`},
		{"approval other word", approval, "maybe", `"maybe"`},
		{"y is only special for approvals", nil, "y", `"y"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(answerFor(tc.schema, tc.line)); got != tc.want {
				t.Errorf("answerFor(%s, %q) = %s, want %s", tc.schema, tc.line, got, tc.want)
			}
		})
	}
}

// fakeRespond records answers and returns the queued errors in turn.
type fakeRespond struct {
	errs []error
	got  []string // "ID=answer"
}

func (f *fakeRespond) respond(_ context.Context, id string, answer json.RawMessage) error {
	f.got = append(f.got, id+"="+string(answer))
	if len(f.errs) == 0 {
		return nil
	}
	err := f.errs[0]
	f.errs = f.errs[1:]
	return err
}

func requested(id, prompt string) keel.Envelope {
	return envelope(keel.HostInputRequested{RequestID: id, ToolCallID: strings.Split(id, "/")[0], Prompt: prompt})
}

func resolved(id string, interrupted bool) keel.Envelope {
	return envelope(keel.HostInputResolved{RequestID: id, ToolCallID: strings.Split(id, "/")[0], Interrupted: interrupted})
}

func envelope(ev keel.Event) keel.Envelope {
	data, err := json.Marshal(ev)
	if err != nil {
		panic(err)
	}
	return keel.Envelope{Type: ev.EventType(), SessionID: "s", RunID: "s/run-1", Data: data}
}

// TestHostInputDialogue drives the asker through every way a question can
// end: delivered, refused as invalid (asked again), settled before the
// answer arrived (unknown, requester gone, run not accepting: said, and
// the next question comes), settled elsewhere while on screen, and input
// that ends with questions still open.
func TestHostInputDialogue(t *testing.T) {
	ctx := context.Background()
	var out bytes.Buffer
	f := &fakeRespond{errs: []error{
		nil, // a: delivered
		keel.Errorf(keel.CodeInvalidAnswer, "answer to %q: want an integer", "b/ask_user"),
		keel.Errorf(keel.CodeUnknownRequest, "no host-input request %q in run s/run-1", "b/ask_user"),
		keel.Errorf(keel.CodeRequesterGone, "the call that asked %q is gone", "c/ask_user"),
		keel.Errorf(keel.CodeNotAccepting, "run s/run-1 no longer accepts commands"),
	}}
	h := &hostInput{respond: f.respond, out: &plainPrompter{w: &out}, echo: true, sessionID: "s"}
	if h.waiting() {
		t.Fatal("waiting before any question")
	}
	h.observe(requested("a/ask_user", "A?"))
	h.observe(requested("b/ask_user", "B?"))
	h.observe(requested("a/ask_user", "A?")) // seen twice (replay): asked once
	h.answer(ctx, "1", true)                 // a: delivered, b comes next
	h.observe(resolved("a/ask_user", false)) // a's resolution: nothing to say
	h.answer(ctx, "x", true)                 // b: invalid, asked again
	h.answer(ctx, "", true)                  // empty: asked again, nothing sent
	h.answer(ctx, "2", true)                 // b: unknown by now
	h.observe(requested("c/ask_user", "C?"))
	h.answer(ctx, "3", true) // c: requester gone
	h.observe(requested("d/ask_user", "D?"))
	h.answer(ctx, "4", true) // d: run not accepting
	h.observe(requested("e/ask_user", "E?"))
	h.observe(requested("f/ask_user", "F?"))
	h.observe(resolved("e/ask_user", true)) // e: closed while on screen
	h.observe(requested("g/ask_user", "G?"))
	h.answer(ctx, "", false) // input ends: f and g left to keel respond
	if h.waiting() {
		t.Error("still waiting for input after it ended")
	}
	h.observe(requested("h/ask_user", "H?")) // after the input ended

	// Without a schema, what parses as JSON is sent as JSON.
	wantSent := []string{`a/ask_user=1`, `b/ask_user="x"`, `b/ask_user=2`, `c/ask_user=3`, `d/ask_user=4`}
	if diff := cmp.Diff(wantSent, f.got); diff != "" {
		t.Errorf("answers sent (-want +got):\n%s", diff)
	}
	want := `? A?
› 1
? B?
› x
  not a valid answer: answer to "b/ask_user": want an integer
› 
› 2
  no host-input request "b/ask_user" in run s/run-1; moving on
? C?
› 3
  the call that asked "c/ask_user" is gone; moving on
? D?
› 4
  run s/run-1 no longer accepts commands; moving on
? E?
› 
  (closed unanswered; no answer needed)
? F?
› 
  input closed; answer from another terminal:
  keel respond s f/ask_user ANSWER   (F?)
  keel respond s g/ask_user ANSWER   (G?)
  keel respond s h/ask_user ANSWER   (H?)
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("dialogue (-want +got):\n%s", diff)
	}
}

// TestHostInputReprompt checks that events rendered while a question
// waits are followed by the prompt again, so the user sees where to type.
func TestHostInputReprompt(t *testing.T) {
	var out bytes.Buffer
	r := newRenderer(&out, renderOptions{answering: true})
	f := &fakeRespond{}
	h := &hostInput{respond: f.respond, out: r, echo: true, sessionID: "s"}
	var seq int64
	show := func(env keel.Envelope) {
		seq++ // durable events always carry their sequence; the renderer drops one without
		env.Seq = seq
		r.Render(env)
		h.observe(env)
	}
	show(requested("a/ask_user", "A?"))
	show(envelope(keel.ToolProposed{ToolCallID: "b", Name: "list_files", Arguments: json.RawMessage(`{}`)}))
	show(resolved("x/ask_user", false)) // not ours, and not shown while answering here
	h.answer(context.Background(), "yes", true)
	show(resolved("a/ask_user", false))
	want := "? A?\n› \n┌ list_files {}\n› yes\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}
