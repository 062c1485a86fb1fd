package transcript_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/transcript"
)

// stream builds envelopes of one run: durable events numbered densely,
// deltas after the last.
type stream struct {
	t   *testing.T
	run string
	seq int64
	out []keel.Envelope
}

func newStream(t *testing.T) *stream { return &stream{t: t, run: "s/run-1"} }

func (s *stream) seal(ev keel.Event) keel.Envelope {
	s.t.Helper()
	env, err := keel.Seal(ev, "s", s.run, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	if err != nil {
		s.t.Fatal(err)
	}
	return env
}

func (s *stream) durable(evs ...keel.Event) *stream {
	for _, ev := range evs {
		env := s.seal(ev)
		s.seq++
		env.Seq = s.seq
		s.out = append(s.out, env)
	}
	return s
}

func (s *stream) delta(evs ...keel.Event) *stream {
	for _, ev := range evs {
		env := s.seal(ev)
		env.AfterSeq = s.seq
		s.out = append(s.out, env)
	}
	return s
}

func text(step, attempt int, s string) keel.TextDelta {
	return keel.TextDelta{Step: step, Attempt: attempt, Text: s}
}

func started() []keel.Event {
	return []keel.Event{keel.RunStarted{Number: 1, Prompt: "p", Model: "m"}, keel.StepStarted{Step: 1}}
}

// TestDeltaRules covers which deltas count: those of the live attempt of
// the current step, until its response is complete.
func TestDeltaRules(t *testing.T) {
	for _, tc := range []struct {
		name    string
		build   func(s *stream)
		text    string
		attempt int
		last    string // the last event's change
	}{
		{"live attempt", func(s *stream) { s.delta(text(1, 1, "a"), text(1, 1, "b")) }, "ab", 1, "text"},
		{"reset drops the attempt", func(s *stream) {
			s.delta(text(1, 1, "lost"))
			s.durable(keel.ProviderStreamReset{Step: 1, Attempt: 1})
			s.delta(text(1, 2, "kept"))
		}, "kept", 2, "text"},
		{"late delta of a reset attempt", func(s *stream) {
			s.durable(keel.ProviderStreamReset{Step: 1, Attempt: 1})
			s.delta(text(1, 1, "late"))
		}, "", 2, "text!abandoned_attempt"},
		{"a later attempt supersedes the live one", func(s *stream) {
			s.delta(text(1, 1, "old"), text(1, 3, "new"))
		}, "new", 3, "text"},
		{"an earlier attempt after a later one", func(s *stream) {
			s.delta(text(1, 2, "new"), text(1, 1, "old"))
		}, "new", 2, "text!abandoned_attempt"},
		{"a step not started", func(s *stream) { s.delta(text(2, 1, "x")) }, "", 1, "text!other_step"},
		{"an earlier step", func(s *stream) {
			s.durable(keel.StepStarted{Step: 2})
			s.delta(text(1, 1, "x"))
		}, "", 1, "text!other_step"},
		{"after the response", func(s *stream) {
			s.delta(text(1, 1, "done"))
			s.durable(keel.ModelCallCompleted{Step: 1, Attempt: 1})
			s.delta(text(1, 1, " more"))
		}, "done", 1, "text!response_complete"},
		{"a completion of a later attempt", func(s *stream) {
			s.delta(text(1, 1, "old"))
			s.durable(keel.ModelCallCompleted{Step: 1, Attempt: 2})
		}, "", 2, "response"},
		{"attempt zero", func(s *stream) { s.delta(text(1, 0, "x")) }, "", 1, "text!invalid"},
		{"empty", func(s *stream) { s.delta(text(1, 1, "")) }, "", 1, "text!empty"},
		{"a reset of an older attempt", func(s *stream) {
			s.delta(text(1, 2, "live"))
			s.durable(keel.ProviderStreamReset{Step: 1, Attempt: 1})
		}, "live", 2, "reset"},
		{"a reset twice", func(s *stream) {
			s.durable(keel.ProviderStreamReset{Step: 1, Attempt: 1}, keel.ProviderStreamReset{Step: 1, Attempt: 1})
		}, "", 2, "reset!duplicate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStream(t)
			s.durable(started()...)
			tc.build(s)
			tr, changes := reduce(s.out)
			st := tr.Run("s/run-1").Step(1)
			want(t, "text", st.Text, tc.text)
			want(t, "attempt", st.Attempt, tc.attempt)
			want(t, "last change", changes[len(changes)-1], tc.last)
		})
	}
}

// TestWaitingRules covers model.waiting (docs/contract.md §20.5): the
// step shows the wait of its live attempt until that attempt's first
// delta, its response, a reset or the run's end; a wait of another step
// or an abandoned attempt shows nothing.
func TestWaitingRules(t *testing.T) {
	waits := func(step, attempt int, d time.Duration) keel.ModelWaiting {
		return keel.ModelWaiting{Step: step, Attempt: attempt, Limit: "anthropic", Wait: keel.Duration(d)}
	}
	shown := &transcript.Waiting{Limit: "anthropic", WaitMS: 4200}
	for _, tc := range []struct {
		name  string
		build func(s *stream)
		want  *transcript.Waiting
		last  string
	}{
		{"waiting", func(s *stream) { s.delta(waits(1, 1, 4200*time.Millisecond)) }, shown, "wait"},
		{"a later notice replaces it", func(s *stream) {
			s.delta(waits(1, 1, time.Second), waits(1, 1, 4200*time.Millisecond))
		}, shown, "wait"},
		{"the first text clears it", func(s *stream) { s.delta(waits(1, 1, time.Second), text(1, 1, "hi")) }, nil, "text"},
		{"reasoning clears it", func(s *stream) {
			s.delta(waits(1, 1, time.Second), keel.ReasoningDelta{Step: 1, Attempt: 1, Text: "hm"})
		}, nil, "reasoning"},
		{"a tool-call draft clears it", func(s *stream) {
			s.delta(waits(1, 1, time.Second), keel.ToolCallDelta{Step: 1, Attempt: 1, Name: "f"})
		}, nil, "draft"},
		{"the response clears it", func(s *stream) {
			s.delta(waits(1, 1, time.Second))
			s.durable(keel.ModelCallCompleted{Step: 1, Attempt: 1})
		}, nil, "response"},
		{"a reset clears it", func(s *stream) {
			s.delta(waits(1, 1, time.Second))
			s.durable(keel.ProviderStreamReset{Step: 1, Attempt: 1})
		}, nil, "reset"},
		{"the next attempt waits", func(s *stream) {
			s.durable(keel.ProviderStreamReset{Step: 1, Attempt: 1})
			s.delta(waits(1, 2, 4200*time.Millisecond))
		}, shown, "wait"},
		{"an abandoned attempt's notice", func(s *stream) {
			s.durable(keel.ProviderStreamReset{Step: 1, Attempt: 1})
			s.delta(waits(1, 1, time.Second))
		}, nil, "wait!abandoned_attempt"},
		{"a cancel clears it", func(s *stream) {
			s.delta(waits(1, 1, time.Second))
			s.durable(keel.RunCancelled{Revision: 1})
		}, nil, "end"},
		{"after the response", func(s *stream) {
			s.durable(keel.ModelCallCompleted{Step: 1, Attempt: 1})
			s.delta(waits(1, 1, time.Second))
		}, nil, "wait!response_complete"},
		{"a notice after the attempt's output", func(s *stream) {
			s.delta(text(1, 1, "hi"), waits(1, 1, time.Second))
		}, nil, "wait!streaming"},
		{"another step", func(s *stream) { s.delta(waits(2, 1, time.Second)) }, nil, "wait!other_step"},
		{"no wait", func(s *stream) { s.delta(waits(1, 1, 0)) }, nil, "wait!empty"},
		{"a negative wait", func(s *stream) { s.delta(waits(1, 1, -time.Second)) }, nil, "wait!invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStream(t)
			s.durable(started()...)
			tc.build(s)
			tr, changes := reduce(s.out)
			want(t, "waiting", tr.Run("s/run-1").Step(1).Waiting, tc.want)
			want(t, "last change", changes[len(changes)-1], tc.last)
		})
	}
}

// TestResetReportsWhatItDropped: renderers learn from the change which
// attempt lost its output and whether it had any.
func TestResetReportsWhatItDropped(t *testing.T) {
	tr := transcript.New()
	s := newStream(t)
	s.durable(started()...)
	s.delta(text(1, 1, "gone"), keel.ReasoningDelta{Step: 1, Attempt: 1, Text: "hmm"},
		keel.ToolCallDelta{Step: 1, Attempt: 1, Index: 0, ID: "c", Name: "f", Arguments: `{"a"`})
	s.durable(keel.ProviderStreamReset{Step: 1, Attempt: 1}, keel.ProviderStreamReset{Step: 1, Attempt: 2})
	var chs []transcript.Change
	for _, env := range s.out {
		chs = append(chs, tr.Apply(env))
	}
	first, second := chs[len(chs)-2], chs[len(chs)-1]
	if first.Abandoned != 1 || !first.Discarded || second.Abandoned != 2 || second.Discarded {
		t.Fatalf("resets: %+v / %+v", first, second)
	}
	st := tr.Run("s/run-1").Step(1)
	if st.Text != "" || st.Reasoning != "" || len(st.Drafts) != 0 || st.Attempt != 3 {
		t.Fatalf("step after resets: %+v", st)
	}
}

// TestDurableFactsWithoutTheirStart: a view that starts mid-run takes
// the facts it gets.
func TestDurableFactsWithoutTheirStart(t *testing.T) {
	s := newStream(t)
	s.seq = 40
	s.durable(keel.ToolFinished{ToolCallID: "x", Name: "read", Status: keel.ToolError, Output: "no"},
		keel.HostInputResolved{RequestID: "x/q", ToolCallID: "x"},
		keel.SteeringApplied{SteeringID: "st"},
		keel.RunCompleted{Text: "done", Steps: 3})
	tr, changes := reduce(s.out)
	want(t, "changes", changes, []string{"tool", "question", "steering", "end"})
	r := tr.Run("s/run-1")
	want(t, "tool", r.Tool("x").State, transcript.ToolState(keel.ToolError))
	want(t, "question", r.Question("x/q").State, transcript.QuestionAnswered)
	want(t, "steering", r.Steering[0].State, transcript.SteeringApplied)
	want(t, "status", r.Status, transcript.Completed)
	want(t, "last seq", tr.LastSeq(), int64(44))
}

// TestSequence: durable events count once, in order; deltas have no
// sequence; a durable event without one is refused.
func TestSequence(t *testing.T) {
	s := newStream(t)
	s.durable(started()...)
	dup := s.out[1]
	noSeq := s.seal(keel.StepStarted{Step: 5})
	s.out = append(s.out, dup, noSeq)
	tr, changes := reduce(s.out)
	want(t, "changes", changes, []string{"run", "step", "step!repeat", "step!no_seq"})
	want(t, "steps", len(tr.Run("s/run-1").Steps), 1)
	want(t, "ignored", tr.View().Ignored, map[transcript.Reason]int{transcript.ReasonRepeat: 1, transcript.ReasonNoSeq: 1})
}

// TestHostInputStatus: the run waits while any question is open.
func TestHostInputStatus(t *testing.T) {
	tr := transcript.New()
	s := newStream(t)
	s.durable(started()...)
	s.durable(keel.HostInputRequested{RequestID: "a/1", ToolCallID: "a", Prompt: "?"},
		keel.HostInputRequested{RequestID: "b/1", ToolCallID: "b", Prompt: "?"},
		keel.HostInputResolved{RequestID: "a/1", ToolCallID: "a"},
		keel.HostInputResolved{RequestID: "b/1", ToolCallID: "b", Interrupted: true},
		keel.HostInputResolved{RequestID: "b/1", ToolCallID: "b"})
	tr.Apply(s.out[0])
	tr.Apply(s.out[1])
	var statuses []transcript.Status
	var last transcript.Change
	for _, env := range s.out[2:] {
		last = tr.Apply(env)
		statuses = append(statuses, last.Run.Status)
	}
	want(t, "statuses", statuses, []transcript.Status{transcript.WaitingForHostInput, transcript.WaitingForHostInput,
		transcript.WaitingForHostInput, transcript.Running, transcript.Running})
	want(t, "second answer", last.Ignored, transcript.ReasonDuplicate)
	want(t, "interrupted", tr.Run("s/run-1").Question("b/1").State, transcript.QuestionInterrupted)
}

// TestToolCardStates: a card only moves forwards; progress counts while
// the call runs.
func TestToolCardStates(t *testing.T) {
	s := newStream(t)
	s.durable(started()...)
	s.delta(keel.ToolCallDelta{Step: 1, Attempt: 1, Index: 0, ID: "c", Name: "copy", Arguments: `{"n":`},
		keel.ToolCallDelta{Step: 1, Attempt: 1, Index: 0, Arguments: `1}`})
	s.durable(keel.ToolProposed{ToolCallID: "c", Name: "copy", Arguments: json.RawMessage(`{"n":1}`), Step: 1})
	s.delta(keel.ToolProgress{ToolCallID: "c", Message: "early"})
	s.durable(keel.ToolStarted{ToolCallID: "c", Name: "copy"}, keel.ToolDetached{ToolCallID: "c", Name: "copy"},
		keel.ToolStarted{ToolCallID: "c", Name: "copy"})
	s.delta(keel.ToolProgress{ToolCallID: "c", Message: "half"}, keel.ToolProgress{ToolCallID: "nope", Message: "?"})
	s.durable(keel.ToolFinished{ToolCallID: "c", Name: "copy", Status: keel.ToolOK, Output: "done"},
		keel.ToolFinished{ToolCallID: "c", Name: "copy", Status: keel.ToolError, Output: "again"})
	s.delta(keel.ToolProgress{ToolCallID: "c", Message: "late"})
	s.durable(keel.ToolDetached{ToolCallID: "c", Name: "copy"})
	tr, changes := reduce(s.out)
	want(t, "changes", changes[2:], []string{"draft", "draft", "tool", "tool", "tool", "tool", "tool!duplicate",
		"tool", "tool!unknown_call", "tool", "tool!duplicate", "tool!call_finished", "tool!call_finished"})
	tc := tr.Run("s/run-1").Tool("c")
	want(t, "state", tc.State, transcript.ToolState(keel.ToolOK))
	want(t, "output", tc.Output, "done")
	want(t, "args", string(tc.Arguments), `{"n":1}`)
	want(t, "drafts", len(tr.Run("s/run-1").Step(1).Drafts), 0)
}

// TestDraftsAssemble: tool_call deltas build drafts by index.
func TestDraftsAssemble(t *testing.T) {
	s := newStream(t)
	s.durable(started()...)
	s.delta(keel.ToolCallDelta{Step: 1, Attempt: 1, Index: 0, ID: "a", Name: "x", Arguments: `{"p":`},
		keel.ToolCallDelta{Step: 1, Attempt: 1, Index: 1, ID: "b", Name: "y"},
		keel.ToolCallDelta{Step: 1, Attempt: 1, Index: 0, Arguments: `2}`},
		keel.ToolCallDelta{Step: 1, Attempt: 1, Index: -1, Arguments: `?`})
	tr, changes := reduce(s.out)
	want(t, "last", changes[len(changes)-1], "draft!invalid")
	ds := tr.Run("s/run-1").Step(1).Drafts
	want(t, "drafts", len(ds), 2)
	want(t, "first", *ds[0], transcript.Draft{Index: 0, ID: "a", Name: "x", Arguments: `{"p":2}`})
}

// TestEndedRun: nothing of a run counts after its terminal event.
func TestEndedRun(t *testing.T) {
	s := newStream(t)
	s.durable(started()...)
	s.durable(keel.RunFailed{Code: keel.CodeProvider, Message: "boom", Retryable: true, Revision: 2},
		keel.StepStarted{Step: 2}, keel.RunCompleted{Text: "no"})
	s.delta(text(1, 1, "late"))
	tr, changes := reduce(s.out)
	want(t, "changes", changes[2:], []string{"end", "step!run_ended", "end!run_ended", "text!run_ended"})
	r := tr.Run("s/run-1")
	want(t, "result", *r.Result, transcript.Result{Code: keel.CodeProvider, Message: "boom", Retryable: true, Revision: 2})
}

// TestUnknownAndUndecodable: an unknown type is kept as other; data that
// does not decode changes nothing, though its sequence counts.
func TestUnknownAndUndecodable(t *testing.T) {
	s := newStream(t)
	s.durable(started()...)
	s.out = append(s.out,
		keel.Envelope{Seq: 3, Type: "future.thing", RunID: s.run, Data: json.RawMessage(`{"x":1}`)},
		keel.Envelope{Type: "future.delta", RunID: "s/run-9", Data: json.RawMessage(`{}`)},
		keel.Envelope{Seq: 4, Type: keel.TypeStepStarted, RunID: s.run, Data: json.RawMessage(`{"step":"two"}`)},
		keel.Envelope{Type: keel.TypeTextDelta, RunID: s.run, Data: json.RawMessage(`{"step":1,"attempt":1,"text":7}`)},
		keel.Envelope{Type: keel.TypeTextDelta, RunID: "other", Data: json.RawMessage(`{"step":1,"attempt":1,"text":"x"}`)})
	tr, changes := reduce(s.out)
	want(t, "changes", changes[2:], []string{"other", "other!unknown_run", "step!undecodable", "text!undecodable", "text!unknown_run"})
	want(t, "last seq", tr.LastSeq(), int64(4))
	want(t, "runs", len(tr.Runs()), 1)
}

// TestHugeFields: the view keeps bounded text; the change carries the
// delta whole.
func TestHugeFields(t *testing.T) {
	s := newStream(t)
	s.durable(started()...)
	big := strings.Repeat("é", transcript.MaxText/2+1) // over MaxText bytes
	s.delta(text(1, 1, big))
	s.durable(keel.ToolProposed{ToolCallID: "c", Name: "n", Arguments: json.RawMessage(`"` + strings.Repeat("a", transcript.MaxField) + `"`)},
		keel.ToolFinished{ToolCallID: "c", Name: "n", Status: keel.ToolOK, Output: big})
	tr := transcript.New()
	var ch transcript.Change
	for i, env := range s.out {
		c := tr.Apply(env)
		if i == 2 {
			ch = c
		}
	}
	st := tr.Run("s/run-1").Step(1)
	if len(ch.Text) != len(big) || len(st.Text) > transcript.MaxText || !st.Truncated || !strings.HasPrefix(big, st.Text) {
		t.Fatalf("change %d bytes, view %d bytes (truncated %v)", len(ch.Text), len(st.Text), st.Truncated)
	}
	tc := tr.Run("s/run-1").Tool("c")
	if string(tc.Arguments) != "null" || len(tc.Output) > transcript.MaxField {
		t.Fatalf("card args %d bytes, output %d bytes", len(tc.Arguments), len(tc.Output))
	}
	if _, err := json.Marshal(tr.View()); err != nil {
		t.Fatal(err)
	}
}

// TestSessionOfRuns: one transcript follows a session's runs.
func TestSessionOfRuns(t *testing.T) {
	s := newStream(t)
	s.durable(started()...)
	s.durable(keel.RunCompleted{Text: "one", Steps: 1})
	s.run = "s/run-2"
	s.durable(keel.RunStarted{Number: 2}, keel.StepStarted{Step: 1})
	s.delta(text(1, 1, "two"))
	tr, _ := reduce(s.out)
	want(t, "runs", len(tr.Runs()), 2)
	want(t, "second", tr.Runs()[1].Step(1).Text, "two")
	want(t, "first", tr.Runs()[0].Status, transcript.Completed)
}

// TestHostedToolRules: a use of a hosted tool is output of its attempt.
// A reset that drops only such uses still says it discarded output; a
// use of a later attempt survives the supersession of an earlier one;
// URLs are kept while they fit MaxField bytes together.
func TestHostedToolRules(t *testing.T) {
	s := newStream(t)
	s.durable(started()...)
	s.durable(keel.HostedToolActivity{Step: 1, Attempt: 1, Name: "web_search", ID: "a"},
		keel.ProviderStreamReset{Step: 1, Attempt: 1},
		keel.HostedToolActivity{Step: 1, Attempt: 3, Name: "web_search", ID: "c"})
	s.delta(text(1, 2, "second attempt"))
	half := strings.Repeat("u", transcript.MaxField/2)
	s.durable(keel.HostedToolActivity{Step: 1, Attempt: 3, Name: "web_search", ID: "big", URLs: []string{half, half, "x"}})
	tr := transcript.New()
	var chs []transcript.Change
	for _, env := range s.out {
		chs = append(chs, tr.Apply(env))
	}
	if reset := chs[3]; reset.Abandoned != 1 || !reset.Discarded {
		t.Fatalf("reset of an attempt with only a hosted use: %+v", reset)
	}
	if ch := chs[4]; ch.Kind != transcript.KindHosted || ch.Hosted == nil || ch.Hosted.ID != "c" || ch.Step == nil {
		t.Fatalf("change of a use of a later attempt: %+v", ch)
	}
	if ch := chs[5]; ch.Discarded || ch.Abandoned != 0 {
		t.Fatalf("attempt 2's first delta dropped output it should not have: %+v", ch)
	}
	st := tr.Run("s/run-1").Step(1)
	if len(st.Hosted) != 2 || st.Hosted[0].ID != "c" || st.Hosted[1].ID != "big" {
		t.Fatalf("uses %+v", st.Hosted)
	}
	if big := st.Hosted[1]; len(big.URLs) != 2 || !big.Truncated {
		t.Fatalf("URLs kept %d (truncated %v), want the two that fit in MaxField", len(big.URLs), big.Truncated)
	}
	// Attempt 3's deltas supersede attempt 2: its uses stay.
	tr.Apply(s.seal(text(1, 3, "third")))
	if st.Attempt != 3 || len(st.Hosted) != 2 {
		t.Fatalf("after attempt 3 began: attempt %d, uses %+v", st.Attempt, st.Hosted)
	}
}
