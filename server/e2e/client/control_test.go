package client_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
)

// Steering accepted during a tool batch enters history after every slot of
// the batch closed, at the next model-step boundary.
func TestSteerAppliesAfterBatch(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	sess := c.Session("steer-batch")
	run, err := sess.Send(ctx, "go", cfg(t, `{"turns":[
	  {"tool_calls":[{"id":"g","name":"gate","arguments":{"key":"steer-batch"}}]},
	  {"text":["done"]}]}`, "gate"))
	require.NoError(t, err)
	waitFor(t, ctx, run, keel.TypeToolStarted)

	id, err := run.SteerRetractable(ctx, "also mention the weather")
	require.NoError(t, err)
	st, err := run.State(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{id}, st.Staged)
	shared.gates.open("steer-batch")

	out, err := run.Outcome(ctx)
	require.NoError(t, err)
	require.Equal(t, "done", out.Text)

	evs := typesOf(logOf(t, ctx, sess), run.ID)
	accepted := slices.Index(evs, keel.TypeSteeringAccepted)
	finished := slices.Index(evs, keel.TypeToolFinished)
	applied := slices.Index(evs, keel.TypeSteeringApplied)
	step2 := slices.Index(evs[applied:], keel.TypeStepStarted) + applied
	require.True(t, accepted < finished && finished < applied && applied < step2, "%v", evs)

	hist, err := sess.History(ctx, 0, 0)
	require.NoError(t, err)
	roles := []string{}
	for _, m := range hist.Messages {
		roles = append(roles, string(m.Role))
	}
	// user, assistant(call), tool result, steering, assistant.
	require.Equal(t, []string{"user", "assistant", "tool", "user", "assistant"}, roles)
	require.Equal(t, id, hist.Messages[3].SteeringID)

	r, err := run.RetractSteering(ctx, id)
	require.ErrorIs(t, err, keel.ErrNotAccepting, "the run has ended: %v", r)
}

// If the model ends its turn while steering is staged, the run continues.
func TestSteerKeepsRunGoing(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	sess := c.Session("steer-continue")
	run, err := sess.Send(ctx, "go", cfg(t, `{"chunk_delay":"30ms","turns":[
	  {"text":["first ","answer ","that ","takes ","a ","while ","to ","stream ","out ","fully"]},
	  {"text":["answer after steering"]}]}`))
	require.NoError(t, err)
	// Steer while the only planned turn streams: the model then ends its
	// turn with the steering staged.
	waitFor(t, ctx, run, keel.TypeTextDelta)
	require.NoError(t, run.Steer(ctx, "one more thing"))
	out, err := run.Outcome(ctx)
	require.NoError(t, err)
	require.Equal(t, "answer after steering", out.Text)
	require.Equal(t, 2, out.Steps)
	evs := typesOf(logOf(t, ctx, sess), run.ID)
	applied := slices.Index(evs, keel.TypeSteeringApplied)
	require.Positive(t, applied)
	require.Contains(t, evs[applied:], keel.TypeStepStarted)
}

func TestRetractSteering(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	sess := c.Session("retract")
	run, err := sess.Send(ctx, "go", cfg(t, `{"turns":[
	  {"tool_calls":[{"id":"g","name":"gate","arguments":{"key":"retract"}}]},
	  {"text":["done"]}]}`, "gate"))
	require.NoError(t, err)
	waitFor(t, ctx, run, keel.TypeToolStarted)
	id, err := run.SteerRetractable(ctx, "never mind")
	require.NoError(t, err)
	res, err := run.RetractSteering(ctx, id)
	require.NoError(t, err)
	require.Equal(t, api.Retracted, res)
	res, err = run.RetractSteering(ctx, "steer-99")
	require.NoError(t, err)
	require.Equal(t, api.NotFound, res)

	kept, err := run.SteerRetractable(ctx, "keep this")
	require.NoError(t, err)
	shared.gates.open("retract")
	waitFor(t, ctx, run, keel.TypeSteeringApplied)
	res, err = run.RetractSteering(ctx, kept)
	if !errors.Is(err, keel.ErrNotAccepting) { // the run may have ended already
		require.NoError(t, err)
		require.Equal(t, api.AlreadyApplied, res)
	}
	_, err = run.Outcome(ctx)
	require.NoError(t, err)
	hist, err := sess.History(ctx, 0, 0)
	require.NoError(t, err)
	var steered []string
	for _, m := range hist.Messages {
		if m.SteeringID != "" {
			steered = append(steered, m.Content)
		}
	}
	require.Equal(t, []string{"keep this"}, steered)
}

// A retraction racing the boundary that applies the steer: every answer
// must match history. Runs retract at points across the first turn, up to
// its last delta, when the turn ends while the retraction travels; and
// after the steering was applied, while the second turn streams. Both
// answers must turn up, so the race is run from both sides.
func TestRetractRace(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	model := shared.book.Add(t, t.Name(), `{"chunk_delay":"30ms","turns":[
	  {"text":["a","b","c","d","e","f","g","h"]},
	  {"text":["after"," the"," steering"," was"," applied",","," still"," streaming"]}]}`)
	// Deltas of the first turn to see before retracting; -1: retract once
	// steering.applied is seen.
	points := []int{0, 4, 7, 8, -1}
	seen := map[api.Retraction]int{}
	for i := range 12 {
		sess := c.Session("race-" + string(rune('a'+i)))
		run, err := sess.Send(ctx, "go", client.WithConfig(api.RunConfig{Model: model}))
		require.NoError(t, err)
		// Steer once the first turn is under way: steering accepted before
		// the first step boundary is applied there (docs/contract.md §5),
		// and there would be nothing to race.
		point, deltas := points[i%len(points)], 0
		var id string
		for ev, err := range run.Events(ctx) {
			require.NoError(t, err)
			if ev.Type == keel.TypeStepStarted && id == "" {
				if id, err = run.SteerRetractable(ctx, "steer"); errors.Is(err, keel.ErrNotAccepting) {
					break // the run finished first
				}
				require.NoError(t, err)
			}
			if ev.Type == keel.TypeTextDelta {
				deltas++
			}
			if ev.Terminal() || (point < 0 && ev.Type == keel.TypeSteeringApplied) || (point >= 0 && id != "" && deltas >= point) {
				break
			}
		}
		if id == "" {
			continue
		}
		res, err := run.RetractSteering(ctx, id)
		if errors.Is(err, keel.ErrNotAccepting) {
			res = "ended"
		} else {
			require.NoError(t, err)
		}
		seen[res]++
		_, err = run.Outcome(ctx)
		require.NoError(t, err)
		applied := slices.Contains(typesOf(logOf(t, ctx, sess), ""), keel.TypeSteeringApplied)
		switch res {
		case api.Retracted:
			require.False(t, applied, "retracted steering was applied")
		case api.AlreadyApplied, "ended":
			require.True(t, applied, "steering reported applied is not in history")
		default:
			t.Fatalf("unexpected retraction %q", res)
		}
	}
	t.Logf("retraction outcomes: %v", seen)
	require.Positive(t, seen[api.Retracted], "no retraction won the race")
	require.Positive(t, seen[api.AlreadyApplied], "no retraction came after the steering was applied")
}

// A tool asks the host; a bad answer is refused with a typed error and
// changes nothing; a good one reaches the tool exactly once.
func TestHostInput(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	sess := c.Session("host-input")
	run, err := sess.Send(ctx, "go", cfg(t, `{"turns":[
	  {"tool_calls":[{"id":"c1","name":"confirm","arguments":{"prompt":"Deploy?"}}]},
	  {"text":["deployed"]}]}`, "confirm"))
	require.NoError(t, err)
	ev := waitFor(t, ctx, run, keel.TypeHostInputRequested)
	e, err := ev.Event()
	require.NoError(t, err)
	req := e.(keel.HostInputRequested)
	require.Equal(t, "c1", req.ToolCallID)
	require.Equal(t, "Deploy?", req.Prompt)

	st, err := sess.State(ctx)
	require.NoError(t, err)
	require.Equal(t, keel.StateWaitingForHostInput, st.State)
	open, err := run.Requests(ctx)
	require.NoError(t, err)
	require.Len(t, open, 1)

	require.ErrorIs(t, run.Respond(ctx, req.RequestID, "yes"), keel.ErrInvalidAnswer)
	require.ErrorIs(t, run.Respond(ctx, "c9/ok", true), keel.ErrUnknownRequest)
	require.NoError(t, run.Respond(ctx, req.RequestID, true))
	// A second answer is refused: the request is closed, or the run has
	// ended already.
	if err := run.Respond(ctx, req.RequestID, false); !errors.Is(err, keel.ErrNotAccepting) {
		require.ErrorIs(t, err, keel.ErrUnknownRequest)
	}

	out, err := run.Outcome(ctx)
	require.NoError(t, err)
	require.Equal(t, "deployed", out.Text)
	hist, err := sess.History(ctx, 0, 0)
	require.NoError(t, err)
	require.Equal(t, "confirmed: true", hist.Messages[2].Content)
	// Once to ask, once with the answer.
	require.Equal(t, 2, executions(run.ID, "c1"))
	st, err = sess.State(ctx)
	require.NoError(t, err)
	require.Equal(t, keel.StateCompleted, st.State)
}

// Two calls of one batch ask at once; requests are keyed by ID and can be
// answered in any order.
func TestConcurrentHostInput(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	sess := c.Session("host-input-2")
	run, err := sess.Send(ctx, "go", cfg(t, `{"turns":[
	  {"tool_calls":[{"id":"a","name":"confirm","arguments":{"prompt":"A?"}},
	                 {"id":"b","name":"ask_user","arguments":{"question":"Colour?"}}]},
	  {"text":["ok"]}]}`, "confirm", "ask_user"))
	require.NoError(t, err)
	var ids []string
	for ev, err := range run.Events(ctx) {
		require.NoError(t, err)
		if ev.Type == keel.TypeHostInputRequested {
			e, _ := ev.Event()
			ids = append(ids, e.(keel.HostInputRequested).RequestID)
			if len(ids) == 2 {
				break
			}
		}
	}
	slices.Sort(ids)
	require.Equal(t, []string{"a/ok", "b/ask_user"}, ids)
	require.NoError(t, run.Respond(ctx, "b/ask_user", "blue"))
	require.NoError(t, run.Respond(ctx, "a/ok", false))
	_, err = run.Outcome(ctx)
	require.NoError(t, err)
	hist, err := sess.History(ctx, 0, 0)
	require.NoError(t, err)
	require.Equal(t, "confirmed: false", hist.Messages[2].Content)
	require.Equal(t, "blue", hist.Messages[3].Content)
}

// Approval policies: ask goes through host input before the call starts;
// deny refuses without starting.
func TestApprovalPolicies(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	sess := c.Session("approval")
	model := shared.book.Add(t, t.Name(), `{"turns":[
	  {"tool_calls":[{"id":"e1","name":"echo","arguments":{"prompt":"hi"}},{"id":"e2","name":"gate","arguments":{"key":"never"}}]},
	  {"text":["ok"]}]}`)
	run, err := sess.Send(ctx, "go", client.WithConfig(api.RunConfig{Model: model, Tools: []string{"echo", "gate"},
		Approvals: map[string]api.Approval{"echo": api.ApprovalAsk, "gate": api.ApprovalDeny}}))
	require.NoError(t, err)
	ev := waitFor(t, ctx, run, keel.TypeHostInputRequested)
	e, _ := ev.Event()
	req := e.(keel.HostInputRequested)
	require.Equal(t, "e1/approval", req.RequestID)
	require.Contains(t, req.Prompt, "echo")
	require.ErrorIs(t, run.Respond(ctx, req.RequestID, map[string]any{"approve": true}), keel.ErrInvalidAnswer)
	require.NoError(t, run.Respond(ctx, req.RequestID, map[string]any{"approved": false, "reason": "not today"}))
	_, err = run.Outcome(ctx)
	require.NoError(t, err)

	var started []string
	finished := map[string]keel.ToolFinished{}
	for _, env := range logOf(t, ctx, sess) {
		ev, _ := env.Event()
		switch e := ev.(type) {
		case keel.ToolStarted:
			started = append(started, e.ToolCallID)
		case keel.ToolFinished:
			finished[e.ToolCallID] = e
		}
	}
	require.Empty(t, started, "neither call may start")
	require.Equal(t, keel.ToolError, finished["e1"].Status)
	require.Contains(t, finished["e1"].Output, "not today")
	require.Contains(t, finished["e2"].Output, "denied by this run's policy")
	_ = json.RawMessage{}
}

// Sending while a run is active: queue it, or turn it into steering.
func TestSendWhileActiveQueueOrSteer(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	sess := c.Session("queue")
	model := shared.book.Add(t, t.Name(), `{"turns":[
	  {"tool_calls":[{"id":"g","name":"gate","arguments":{"key":"queue"}}]},
	  {"text":["first"]},{"text":["second"]}]}`)
	opt := client.WithConfig(api.RunConfig{Model: model, Tools: []string{"gate"}})
	run1, err := sess.Send(ctx, "one", opt)
	require.NoError(t, err)
	waitFor(t, ctx, run1, keel.TypeToolStarted)

	steered, err := sess.Send(ctx, "as steering", opt, client.OrSteer())
	require.NoError(t, err)
	require.Equal(t, run1.ID, steered.ID)
	require.NotEmpty(t, steered.SteeringID)

	run2, err := sess.Send(ctx, "two", opt, client.Queue())
	require.NoError(t, err)
	require.True(t, run2.Queued)
	require.Equal(t, 2, run2.Number)

	shared.gates.open("queue")
	out1, err := run1.Outcome(ctx)
	require.NoError(t, err)
	require.Equal(t, "first", out1.Text)
	out2, err := run2.Outcome(ctx)
	require.NoError(t, err)
	require.Equal(t, "second", out2.Text)
	require.Equal(t, int64(2), out2.Revision)
	logOf(t, ctx, sess)
}

// Send returns once the session asked Temporal to start the run, before
// its workflow may exist (docs/contract.md §11.1); commands sent right
// away wait for it instead of finding no run.
func TestCommandsRightAfterSend(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	script := `{"turns":[{"tool_calls":[{"id":"g","name":"gate","arguments":{"key":"right-after"}}]},{"text":["done"]}]}`
	for i := range 5 {
		sess := c.Session(fmt.Sprintf("right-after-send-%d", i))
		run, err := sess.Send(ctx, "go", cfg(t, script, "gate"))
		require.NoError(t, err)
		_, err = run.SteerRetractable(ctx, "and then some")
		require.NoError(t, err, "steer right after send")
		_, err = run.State(ctx)
		require.NoError(t, err, "state right after send")
		require.NoError(t, run.Cancel(ctx), "cancel right after send")
		_, err = run.Outcome(ctx)
		require.ErrorIs(t, err, keel.ErrCancelled)
	}
}
