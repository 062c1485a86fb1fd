package workflows_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
)

// toolEvents returns "type:call[:status]" for each tool event of a log.
func toolEvents(t *testing.T, evs []keel.Envelope) []string {
	var out []string
	for _, ev := range decode(t, evs) {
		switch e := ev.(type) {
		case keel.ToolStarted:
			out = append(out, "started:"+e.ToolCallID)
		case keel.ToolDetached:
			out = append(out, "detached:"+e.ToolCallID)
		case keel.ToolFinished:
			out = append(out, "finished:"+e.ToolCallID+":"+string(e.Status))
		}
	}
	return out
}

// steeringID is the ID a steer update was answered with.
func steeringID(t *testing.T, steer updateResult) string {
	t.Helper()
	res, ok := steer.value.(api.SteerResult)
	require.True(t, ok, "the steer was refused: %v %v", steer.rejected, steer.err)
	return res.SteeringID
}

// docs/contract.md §5.1–5.3: steering sent to the session during a tool
// batch (naming its run, as the client does) is staged, and enters the
// transcript after every slot of the batch closed, at the next step
// boundary; a retraction before that boundary wins (its text never enters
// the transcript), one after it finds the steering applied, and one of an
// unknown ID finds nothing.
func TestSteerAppliesAfterBatch(t *testing.T) {
	env := newRunEnv(t, `{"turns":[
	  {"tool_calls":[{"id":"s","name":"sleep","arguments":{"seconds":60}},{"id":"e","name":"echo","arguments":{"text":"x"}}]},
	  {"tool_calls":[{"id":"t","name":"sleep","arguments":{"seconds":60}}]},
	  {"text":["done"]}]}`)
	const run = "s1/run-1"
	var kept, dropped, retracted, unknown, late updateResult
	var staged api.SessionStatus
	env.RegisterDelayedCallback(func() {
		env.update(api.UpdateSteer, "kept", &kept, api.SteerRequest{Text: "mention the weather", RunID: run})
		env.update(api.UpdateSteer, "dropped", &dropped, api.SteerRequest{Text: "never mind", RunID: run})
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		id := steeringID(t, dropped)
		env.update(api.UpdateRetractSteering, "retract", &retracted, api.RetractRequest{SteeringID: id, RunID: run})
		env.update(api.UpdateRetractSteering, "unknown", &unknown, api.RetractRequest{SteeringID: "steer-99", RunID: run})
	}, 2*time.Second)
	env.RegisterDelayedCallback(func() { staged = query[api.SessionStatus](t, env, api.QueryState) }, 3*time.Second)
	env.RegisterDelayedCallback(func() {
		id := steeringID(t, kept)
		env.update(api.UpdateRetractSteering, "late", &late, api.RetractRequest{SteeringID: id, RunID: run})
	}, 90*time.Second)
	res := env.execSession(t, promptOf("go", "sleep", "echo"))

	id := steeringID(t, kept)
	require.Equal(t, []string{id}, staged.Run.Staged, "staged until the boundary, the retracted one gone")
	require.Equal(t, api.RetractResult{Result: api.Retracted}, retracted.value)
	require.Equal(t, api.RetractResult{Result: api.NotFound}, unknown.value)
	require.Equal(t, api.RetractResult{Result: api.AlreadyApplied}, late.value)

	evs := types(res.Events)
	accepted := slices.Index(evs, keel.TypeSteeringAccepted)
	applied := slices.Index(evs, keel.TypeSteeringApplied)
	_, sleepDone := at(res.Events, keel.TypeToolFinished, 0)
	_, sleepDone = at(res.Events, keel.TypeToolFinished, sleepDone+1)
	_, step1 := at(res.Events, keel.TypeStepStarted, 0)
	_, step2 := at(res.Events, keel.TypeStepStarted, step1+1)
	require.True(t, accepted < sleepDone && sleepDone < applied && applied < step2,
		"accepted, the batch closed, applied, step 2: %v", evs)
	require.Len(t, find[keel.SteeringApplied](t, res.Events), 1)
	require.Len(t, find[keel.SteeringRetracted](t, res.Events), 1)

	var roles []string
	for _, m := range res.Messages {
		roles = append(roles, string(m.Role))
	}
	// user, assistant (two calls), two results, the steering, assistant
	// (a call), its result, the answer.
	require.Equal(t, []string{"user", "assistant", "tool", "tool", "user", "assistant", "tool", "assistant"}, roles)
	require.Equal(t, keel.Message{Role: keel.RoleUser, Content: "mention the weather", SteeringID: id}, res.Messages[4])
}

// docs/contract.md §5.2: when the model ends its turn while steering is
// staged, the run takes another step. The steering arrives during the
// turn (in its retry wait), so the turn's end finds it staged.
func TestSteerKeepsRunGoing(t *testing.T) {
	env := newRunEnv(t, `{"turns":[
	  {"failures":[{"kind":"rate_limited","status":429,"retry_after":"3s"}],"text":["first answer"]},
	  {"text":["answer after steering"]}]}`)
	var steered updateResult
	env.RegisterDelayedCallback(func() {
		env.update(api.UpdateSteer, "steer", &steered, api.SteerRequest{Text: "one more thing", RunID: "s1/run-1"})
	}, time.Second)
	res := env.execSession(t, promptOf("go"))

	require.NoError(t, steered.rejected)
	require.Equal(t, keel.StatusCompleted, res.Outcome.Status)
	require.Equal(t, "answer after steering", res.Outcome.Text)
	require.Equal(t, 2, res.Outcome.Steps)
	_, call := at(res.Events, keel.TypeModelCallCompleted, 0)
	_, applied := at(res.Events, keel.TypeSteeringApplied, call)
	_, step2 := at(res.Events, keel.TypeStepStarted, applied)
	require.Less(t, call, step2, "applied after the turn ended, before step 2")
	require.Equal(t, []keel.Message{keel.UserMessage("go"), {Role: keel.RoleAssistant, Content: "first answer"},
		{Role: keel.RoleUser, Content: "one more thing", SteeringID: "steer-1"},
		{Role: keel.RoleAssistant, Content: "answer after steering"}}, res.Messages)
}

// docs/contract.md §6.4, §7.1, §7.2: Run.Cancel (the session's cancel
// signal naming the run), sent twice, cancels a run in its tool batch
// once: every unresolved call gets an interrupted tool.finished and
// result (a call waiting for its approval among them, which never
// started), its host-input request closes as interrupted, a call that had
// finished keeps its result, and the run commits run.cancelled with
// revision + 1; the session goes idle.
func TestCancelDuringTools(t *testing.T) {
	env := newRunEnv(t, `{"turns":[
	  {"tool_calls":[{"id":"s","name":"sleep","arguments":{"seconds":3600}},
	                 {"id":"a","name":"echo","arguments":{"text":"needs approval"}},
	                 {"id":"f","name":"fail","arguments":{"text":"now"}}]},
	  {"text":["never"]}]}`)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(api.SignalCancel, api.CancelRequest{RunID: "s1/run-1"})
		env.SignalWorkflow(api.SignalCancel, api.CancelRequest{RunID: "s1/run-1"})
	}, time.Minute)
	in := promptOf("go", "sleep", "echo", "fail")
	in.Config.Approvals = map[string]api.Approval{"echo": api.ApprovalAsk}
	res := env.execSession(t, in)

	require.Equal(t, keel.StatusCancelled, res.Outcome.Status)
	require.ErrorIs(t, res.Outcome.Err(), keel.ErrCancelled)
	require.Equal(t, int64(1), res.Outcome.Revision)
	require.Equal(t, keel.StateIdle, res.Carry.State)
	cancelledAt, _ := at(res.Events, keel.TypeRunCancelled, 0)
	require.Equal(t, time.Minute, cancelledAt.Sub(res.Events[0].At), "cancelled when asked, not after the sleep")

	tools := toolEvents(t, res.Events)
	for _, want := range []string{"finished:s:interrupted", "finished:a:interrupted", "finished:f:error"} {
		require.Contains(t, tools, want)
	}
	require.NotContains(t, tools, "started:a", "the call waiting for approval never started")
	resolved := find[keel.HostInputResolved](t, res.Events)
	require.Len(t, resolved, 1)
	require.True(t, resolved[0].Interrupted)

	var results []string
	for _, m := range res.Messages {
		if m.Role == keel.RoleTool {
			results = append(results, m.ToolCallID+":"+string(m.ToolStatus))
		}
	}
	require.Equal(t, []string{"s:interrupted", "a:interrupted", "f:error"}, results, "every call answered, in model order")
}

// docs/contract.md §2.7, §8.1, §8.2: a detached call records tool.detached
// right after tool.started and gets a placeholder; the loop goes on; an
// end of turn while it runs waits for it; its result enters at the next
// step boundary as a user message naming the call.
func TestDetachedTool(t *testing.T) {
	release := make(chan struct{})
	env := newRunEnv(t, `{"turns":[
	  {"tool_calls":[{"id":"j","name":"bg","arguments":{}}]},
	  {"text":["started the job"]},
	  {"text":["the job is done"]}]}`, detachedJob("bg", "job output", release))
	env.closeAfterTurns(release, 2)
	res := env.execSession(t, promptOf("go", "bg"))

	require.Equal(t, "the job is done", res.Outcome.Text)
	require.Equal(t, []string{"started:j", "detached:j", "finished:j:ok"}, toolEvents(t, res.Events))
	_, step1 := at(res.Events, keel.TypeStepStarted, 0)
	_, step2 := at(res.Events, keel.TypeStepStarted, step1+1)
	_, finished := at(res.Events, keel.TypeToolFinished, 0)
	_, step3 := at(res.Events, keel.TypeStepStarted, step2+1)
	require.True(t, step2 < finished && finished < step3, "the loop went on, then waited: %v", types(res.Events))

	require.Contains(t, res.Messages[2].Content, "running in the background", "the call's placeholder")
	require.Equal(t, keel.RoleUser, res.Messages[4].Role)
	require.Contains(t, res.Messages[4].Content, "[background job j (bg) finished")
	require.Contains(t, res.Messages[4].Content, "job output")
	require.Len(t, res.Messages, 6)
}
