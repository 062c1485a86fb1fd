package workflows_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/internal/carry"
)

const twoStepScript = `{"turns":[
  {"text":["Let me ", "echo."],"tool_calls":[{"id":"c1","name":"echo","arguments":{"text":"hi"}}],
   "usage":{"input_tokens":10,"output_tokens":5}},
  {"text":["Done."],"usage":{"input_tokens":20,"output_tokens":2}}
]}`

func TestRunCompletesWithToolCall(t *testing.T) {
	env := newRunEnv(t, twoStepScript)
	res := env.execSession(t, promptOf("say hi", "echo"))

	want := []string{
		keel.TypeRunStarted,
		keel.TypeStepStarted, keel.TypeUsageUpdated, keel.TypeModelCallCompleted,
		keel.TypeToolProposed, keel.TypeToolStarted, keel.TypeToolFinished,
		keel.TypeStepStarted, keel.TypeUsageUpdated, keel.TypeModelCallCompleted,
		keel.TypeRunCompleted,
	}
	if diff := cmp.Diff(want, types(res.Events)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	require.Equal(t, keel.StatusCompleted, res.Outcome.Status)
	require.Equal(t, "Done.", res.Outcome.Text)
	require.Equal(t, int64(1), res.Outcome.Revision)
	require.Equal(t, 2, res.Outcome.Steps)
	require.Equal(t, keel.Usage{InputTokens: 30, OutputTokens: 7, Requests: 2}, res.Outcome.UsageTotal)

	wantMsgs := []keel.Message{
		{Role: keel.RoleUser, Content: "say hi"},
		{Role: keel.RoleAssistant, Content: "Let me echo.", ToolCalls: []keel.ToolCall{{ID: "c1", Name: "echo", Arguments: []byte(`{"text":"hi"}`)}}},
		{Role: keel.RoleTool, ToolCallID: "c1", ToolName: "echo", ToolStatus: keel.ToolOK, Content: "echo: hi"},
		{Role: keel.RoleAssistant, Content: "Done."},
	}
	if diff := cmp.Diff(wantMsgs, res.Messages); diff != "" {
		t.Fatalf("messages (-want +got):\n%s", diff)
	}
}

// docs/contract.md §2.1: Started is first and carries the starting revision.
func TestRunStartedFirstWithRevision(t *testing.T) {
	env := newRunEnv(t, `{"turns":[{"text":["hi"]}]}`)
	in := promptOf("hello")
	// The session committed two runs before: revision 7, its log at 41.
	in.Carry = &carry.SessionCarry{Revision: 7, Seq: 41, Runs: 2}
	res := env.execSession(t, in)
	started := find[keel.RunStarted](t, res.Events)
	require.Len(t, started, 1)
	require.Equal(t, keel.RunStarted{Number: 3, Revision: 7, Prompt: "hello", Model: "scripted:test"}, started[0])
	require.Equal(t, int64(42), res.Events[0].Seq)
	require.Equal(t, int64(8), res.Outcome.Revision)
}

// docs/contract.md §2.2: StepStarted precedes each step's provider activity, with an
// estimate that grows with the conversation.
func TestStepStartedBeforeEachTurn(t *testing.T) {
	env := newRunEnv(t, twoStepScript)
	res := env.execSession(t, promptOf("say hi", "echo"))
	steps := find[keel.StepStarted](t, res.Events)
	require.Len(t, steps, 2)
	require.Equal(t, 1, steps[0].Step)
	require.Equal(t, 2, steps[1].Step)
	require.Positive(t, steps[0].EstimatedContextTokens)
	require.Greater(t, steps[1].EstimatedContextTokens, steps[0].EstimatedContextTokens)
	// Each model_call.completed for step n comes after step.started n and
	// before step.started n+1.
	calls := find[keel.ModelCallCompleted](t, res.Events)
	require.Len(t, calls, 2)
	_, s1 := at(res.Events, keel.TypeStepStarted, 0)
	_, c1 := at(res.Events, keel.TypeModelCallCompleted, s1)
	_, s2 := at(res.Events, keel.TypeStepStarted, s1+1)
	require.Less(t, c1, s2)
}

// docs/contract.md §2.4, §2.5: proposed before started, then exactly one finished,
// every per-call event carrying the call ID.
func TestToolLifecycle(t *testing.T) {
	env := newRunEnv(t, twoStepScript)
	res := env.execSession(t, promptOf("say hi", "echo"))
	var seen []string
	for _, ev := range decode(t, res.Events) {
		switch e := ev.(type) {
		case keel.ToolProposed:
			seen = append(seen, "proposed:"+e.ToolCallID)
		case keel.ToolStarted:
			seen = append(seen, "started:"+e.ToolCallID)
		case keel.ToolFinished:
			seen = append(seen, "finished:"+e.ToolCallID+":"+string(e.Status))
		}
	}
	require.Equal(t, []string{"proposed:c1", "started:c1", "finished:c1:ok"}, seen)
}

// docs/contract.md §2.6: an unavailable tool finishes as unavailable with no ToolStarted,
// and the model hears about it.
func TestUnavailableTool(t *testing.T) {
	env := newRunEnv(t, `{"turns":[
	  {"tool_calls":[{"id":"c1","name":"nope","arguments":{}}]},
	  {"text":["ok"]}]}`)
	res := env.execSession(t, promptOf("go", "echo"))
	require.Empty(t, find[keel.ToolStarted](t, res.Events))
	fin := find[keel.ToolFinished](t, res.Events)
	require.Len(t, fin, 1)
	require.Equal(t, keel.ToolUnavailable, fin[0].Status)
	require.Equal(t, keel.ToolUnavailable, res.Messages[2].ToolStatus)
	require.Contains(t, res.Messages[2].Content, `"nope" is not available`)
}

// docs/contract.md §2.8, §2.9: calls of one response are proposed in model order before
// any starts; their finishes interleave by completion (the durable sleep
// finishes last); their results enter history in model order.
func TestParallelCallsProposedInModelOrder(t *testing.T) {
	env := newRunEnv(t, `{"turns":[
	  {"tool_calls":[
	     {"id":"a","name":"sleep","arguments":{"seconds":30}},
	     {"id":"b","name":"echo","arguments":{"text":"B"}},
	     {"id":"c","name":"fail","arguments":{"text":"C"}}]},
	  {"text":["ok"]}]}`)
	res := env.execSession(t, promptOf("go", "sleep", "echo", "fail"))
	var order []string
	for _, ev := range decode(t, res.Events) {
		switch e := ev.(type) {
		case keel.ToolProposed:
			order = append(order, "P"+e.ToolCallID)
		case keel.ToolStarted:
			order = append(order, "S"+e.ToolCallID)
		case keel.ToolFinished:
			order = append(order, "F"+e.ToolCallID)
		}
	}
	require.Equal(t, []string{"Pa", "Pb", "Pc", "Sa", "Sb", "Sc"}, order[:6])
	require.Equal(t, "Fa", order[len(order)-1], "the 30 s sleep finishes last: %v", order)

	var results []string
	for _, m := range res.Messages {
		if m.Role == keel.RoleTool {
			results = append(results, m.ToolCallID+":"+string(m.ToolStatus))
		}
	}
	require.Equal(t, []string{"a:ok", "b:ok", "c:error"}, results)

	// The sleep is a durable timer: 30 s of workflow time passed.
	for _, f := range find[keel.ToolFinished](t, res.Events) {
		if f.ToolCallID == "a" {
			require.Equal(t, 30*time.Second, f.Duration.Std())
		}
	}
}

// A tool that panics gives an error result; the run goes on.
func TestToolPanicIsAnErrorResult(t *testing.T) {
	env := newRunEnv(t, `{"turns":[
	  {"tool_calls":[{"id":"c1","name":"boom","arguments":{}}]},
	  {"text":["recovered"]}]}`)
	res := env.execSession(t, promptOf("go", "boom"))
	fin := find[keel.ToolFinished](t, res.Events)
	require.Len(t, fin, 1)
	require.Equal(t, keel.ToolError, fin[0].Status)
	require.Contains(t, fin[0].Output, "panicked")
	require.Equal(t, keel.StatusCompleted, res.Outcome.Status)
}

// docs/contract.md §2.11, §3.1: a model that never stops calling tools fails the
// run with ErrMaxSteps after the limit, with one terminal event.
func TestMaxSteps(t *testing.T) {
	turn := `{"tool_calls":[{"id":"c","name":"echo","arguments":{"text":"again"}}]}`
	env := newRunEnv(t, `{"turns":[`+turn+`,`+turn+`,`+turn+`,`+turn+`]}`)
	in := promptOf("loop", "echo")
	in.Config.MaxSteps = 3
	res := env.execSession(t, in)
	require.Equal(t, keel.StatusFailed, res.Outcome.Status)
	require.ErrorIs(t, res.Outcome.Err(), keel.ErrMaxSteps)
	require.Len(t, find[keel.StepStarted](t, res.Events), 3)
	failed := find[keel.RunFailed](t, res.Events)
	require.Len(t, failed, 1)
	require.Equal(t, keel.CodeMaxSteps, failed[0].Code)
	require.Equal(t, int64(1), failed[0].Revision)
}

// The transcript a turn sees is the session's plus the run's, rebuilt from
// the cache: the second turn of a run gets both earlier messages.
func TestRunSeesSessionTranscript(t *testing.T) {
	env := newRunEnv(t, `{"turns":[{"text":["one"]},{"text":["two"]}]}`)
	in := promptOf("second prompt")
	in.Carry = &carry.SessionCarry{Transcript: []keel.Message{keel.UserMessage("first prompt"), {Role: keel.RoleAssistant, Content: "one"}}}
	res := env.execSession(t, in)
	// The scripted provider plays the turn numbered by the assistant
	// messages it sees: "two" proves it saw the session's transcript.
	require.Equal(t, "two", res.Outcome.Text)
}
