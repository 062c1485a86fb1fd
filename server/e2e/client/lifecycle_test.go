package client_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
)

// toolEvents returns "type:call:status" for each tool event of the log.
func toolEvents(t *testing.T, evs []keel.Envelope) []string {
	var out []string
	for _, env := range evs {
		ev, err := env.Event()
		require.NoError(t, err)
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

// Cancelling reaches a running tool (its context is cancelled), gives every
// unresolved call an interrupted result — including one still waiting for
// approval — increments the revision, and is idempotent.
func TestCancelDuringTools(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	sess := c.Session("cancel-tools")
	model := shared.book.Add(t, t.Name(), `{"turns":[
	  {"tool_calls":[{"id":"g","name":"gate","arguments":{"key":"cancel-tools"}},
	                 {"id":"s","name":"sleep","arguments":{"seconds":3600}},
	                 {"id":"a","name":"echo","arguments":{"prompt":"needs approval"}}]},
	  {"text":["never"]}]}`)
	run, err := sess.Send(ctx, "go", client.WithConfig(api.RunConfig{Model: model,
		Tools: []string{"gate", "sleep", "echo"}, Approvals: map[string]api.Approval{"echo": api.ApprovalAsk}}))
	require.NoError(t, err)
	waitFor(t, ctx, run, keel.TypeHostInputRequested)

	require.NoError(t, run.Cancel(ctx))
	require.NoError(t, run.Cancel(ctx)) // idempotent
	out, err := run.Outcome(ctx)
	require.ErrorIs(t, err, keel.ErrCancelled)
	require.Equal(t, keel.StatusCancelled, out.Status)
	require.Equal(t, int64(1), out.Revision)
	require.NoError(t, run.Cancel(ctx)) // still harmless after the end
	require.ErrorIs(t, sess.Run(7).Cancel(ctx), keel.ErrNotFound, "a run that never existed")

	evs := logOf(t, ctx, sess)
	types := typesOf(evs, "")
	require.Equal(t, keel.TypeRunCancelled, types[len(types)-1])
	require.Equal(t, 1, countOf(types, keel.TypeRunCancelled))
	tools := toolEvents(t, evs)
	for _, want := range []string{"finished:g:interrupted", "finished:s:interrupted", "finished:a:interrupted"} {
		require.Contains(t, tools, want)
	}
	require.NotContains(t, tools, "started:a")
	select {
	case <-gateCancelled("cancel-tools"):
	case <-ctx.Done():
		t.Fatal("the gate tool's context was never cancelled")
	}

	st, err := sess.State(ctx)
	require.NoError(t, err)
	require.Equal(t, keel.StateIdle, st.State)
	hist, err := sess.History(ctx, 0, 0)
	require.NoError(t, err)
	var results []string
	for _, m := range hist.Messages {
		if m.Role == keel.RoleTool {
			results = append(results, m.ToolCallID+":"+string(m.ToolStatus))
		}
	}
	require.Equal(t, []string{"g:interrupted", "s:interrupted", "a:interrupted"}, results)

	// The next prompt starts from the committed history.
	run2, err := sess.Send(ctx, "again", client.WithConfig(api.RunConfig{Model: model}))
	require.NoError(t, err)
	require.Equal(t, int64(1), run2.Revision)
	_, err = run2.Outcome(ctx)
	require.NoError(t, err)
}

// The Web UI's Cancel (a Temporal cancellation request on the session's
// current execution, which runs the run) takes the same cooperative path,
// and the session lives on.
func TestTemporalCancelIsCooperative(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	sess := c.Session("cancel-temporal")
	run, err := sess.Send(ctx, "go", cfg(t, `{"turns":[
	  {"tool_calls":[{"id":"s","name":"sleep","arguments":{"seconds":3600}}]},{"text":["never"]}]}`, "sleep"))
	require.NoError(t, err)
	waitFor(t, ctx, run, keel.TypeToolStarted)
	require.NoError(t, c.Temporal().CancelWorkflow(ctx, sess.ID(), ""))
	_, err = run.Outcome(ctx)
	require.ErrorIs(t, err, keel.ErrCancelled)
	st, err := sess.State(ctx)
	require.NoError(t, err)
	require.Nil(t, st.Closed, "the session lives on")
	require.Contains(t, toolEvents(t, logOf(t, ctx, sess)), "finished:s:interrupted")
}

// A host-input wait is cancellable, and an answer after that is refused.
func TestCancelDuringHostInput(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	sess := c.Session("cancel-host")
	run, err := sess.Send(ctx, "go", cfg(t, `{"turns":[
	  {"tool_calls":[{"id":"q","name":"ask_user","arguments":{"question":"Well?"}}]},{"text":["never"]}]}`, "ask_user"))
	require.NoError(t, err)
	ev := waitFor(t, ctx, run, keel.TypeHostInputRequested)
	e, _ := ev.Event()
	id := e.(keel.HostInputRequested).RequestID
	require.NoError(t, sess.Cancel(ctx))
	_, err = run.Outcome(ctx)
	require.ErrorIs(t, err, keel.ErrCancelled)
	err = run.Respond(ctx, id, "too late")
	require.ErrorIs(t, err, keel.ErrNotAccepting)
	resolved := false
	for _, env := range logOf(t, ctx, sess) {
		if env.Type == keel.TypeHostInputResolved {
			ev, _ := env.Event()
			resolved = ev.(keel.HostInputResolved).Interrupted
		}
	}
	require.True(t, resolved, "the open request was not closed as interrupted")
}

// A detached call runs while the loop goes on; its result enters history
// when it finishes, and an end of turn waits for it.
func TestDetachedTool(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	sess := c.Session("detached")
	run, err := sess.Send(ctx, "go", cfg(t, `{"turns":[
	  {"tool_calls":[{"id":"j","name":"bg","arguments":{"key":"detached"}}]},
	  {"text":["started the job"]},
	  {"text":["the job is done"]}]}`, "bg"))
	require.NoError(t, err)
	// The loop goes on: step 2 starts while the job runs.
	seenStep2 := false
	for ev, err := range run.Events(ctx) {
		require.NoError(t, err)
		if ev.Type == keel.TypeModelCallCompleted {
			e, _ := ev.Event()
			if e.(keel.ModelCallCompleted).Step == 2 {
				seenStep2 = true
				break
			}
		}
	}
	require.True(t, seenStep2)
	shared.gates.open("detached")
	out, err := run.Outcome(ctx)
	require.NoError(t, err)
	require.Equal(t, "the job is done", out.Text)

	evs := logOf(t, ctx, sess)
	types := typesOf(evs, "")
	detached := slices.Index(types, keel.TypeToolDetached)
	require.Equal(t, keel.TypeToolStarted, types[detached-1])
	finished := slices.Index(types, keel.TypeToolFinished)
	step2 := slices.Index(types[detached:], keel.TypeStepStarted) + detached
	require.Less(t, step2, finished, "tool.finished comes after the later step.started")

	hist, err := sess.History(ctx, 0, 0)
	require.NoError(t, err)
	require.Contains(t, hist.Messages[2].Content, "running in the background")
	require.Equal(t, keel.RoleUser, hist.Messages[4].Role)
	require.Contains(t, hist.Messages[4].Content, "gate detached opened")
}

// Pending jobs are cancelled before every terminal commit: here max steps.
func TestDetachedJobsStopAtMaxSteps(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	sess := c.Session("detached-max")
	model := shared.book.Add(t, t.Name(), `{"turns":[
	  {"tool_calls":[{"id":"j","name":"bg","arguments":{"key":"never-opened"}}]},
	  {"tool_calls":[{"id":"e","name":"echo","arguments":{"prompt":"x"}}]},
	  {"text":["never"]}]}`)
	run, err := sess.Send(ctx, "go", client.WithConfig(api.RunConfig{Model: model, Tools: []string{"bg", "echo"}, MaxSteps: 2}))
	require.NoError(t, err)
	_, err = run.Outcome(ctx)
	require.ErrorIs(t, err, keel.ErrMaxSteps)
	types := typesOf(logOf(t, ctx, sess), "")
	last := len(types) - 1
	require.Equal(t, keel.TypeRunFailed, types[last])
	require.Contains(t, toolEvents(t, logOf(t, ctx, sess)), "finished:j:interrupted")
}

// An operator terminating a session's execution while a run is active
// ends the session (docs/contract.md §3.1, §10.3): no code is left to
// record the run's terminal event, so Outcome answers keel.Terminated
// from the session's closed state, with the operator's reason; the log
// keeps what the run recorded, and the session takes no new prompt.
func TestTerminatedSessionEndsItsActiveRun(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	sess := c.Session("terminated-inline")
	model := shared.book.Add(t, t.Name(), `{"turns":[
	  {"tool_calls":[{"id":"s","name":"sleep","arguments":{"seconds":3600}}]},{"text":["never"]}]}`)
	run, err := sess.Send(ctx, "go", client.WithConfig(api.RunConfig{Model: model, Tools: []string{"sleep"}}))
	require.NoError(t, err)
	waitFor(t, ctx, run, keel.TypeToolStarted)
	require.NoError(t, c.Temporal().TerminateWorkflow(ctx, sess.ID(), "", "operator says stop"))

	out, err := sess.Run(1).Outcome(ctx)
	require.ErrorIs(t, err, keel.ErrTerminated)
	require.ErrorContains(t, err, "operator says stop")
	require.Equal(t, keel.StatusFailed, out.Status)
	types := typesOf(logOf(t, ctx, sess), run.ID)
	require.Equal(t, keel.TypeToolStarted, types[len(types)-1], "the log keeps what the run recorded")

	st, err := sess.State(ctx)
	require.NoError(t, err)
	require.Equal(t, keel.StateTerminated, st.State)
	_, err = sess.Send(ctx, "next", client.WithConfig(api.RunConfig{Model: model}))
	require.ErrorIs(t, err, keel.ErrNotAccepting)
}

// Shutdown is shared through Temporal: the first call cancels every active
// run and reports how many (each open session is asked its state: lean
// ones upsert no KeelState, and a v0.1.0 execution's counts the same);
// then new sessions and runs fail; later calls, from any client, report
// zero.
func TestShutdown(t *testing.T) {
	srv := keeltest.StartServer(t, devserver.Config{})
	book := &keeltest.ScriptBook{}
	model := book.Add(t, "sleepy", `{"turns":[
	  {"tool_calls":[{"id":"s","name":"sleep","arguments":{"seconds":3600}}]},{"text":["never"]}]}`)
	keeltest.StartWorker(t, srv, keeltest.WorkerOptions{Models: book})
	c1 := keeltest.Client(t, srv, nil)
	c2 := keeltest.Client(t, srv, nil)
	ctx := testCtx(t)
	opt := client.WithConfig(api.RunConfig{Model: model, Tools: []string{"sleep"}})

	var runs []*client.Run
	keeltest.StartReleasedSession(t, c1, "sd-old")
	for _, id := range []string{"sd-1", "sd-2", "sd-old"} {
		run, err := c1.Session(id).Send(ctx, "sleep", opt)
		require.NoError(t, err)
		waitFor(t, ctx, run, keel.TypeToolStarted)
		runs = append(runs, run)
	}
	idle := c1.Session("sd-idle")
	r, err := idle.Send(ctx, "x", client.WithConfig(api.RunConfig{Model: book.Add(t, "quick", `{"turns":[{"text":["hi"]}]}`)}))
	require.NoError(t, err)
	_, err = r.Outcome(ctx)
	require.NoError(t, err)
	waitVisible(t, ctx, c1, "sd-1", "sd-2", "sd-old", "sd-idle")

	res, err := c1.Shutdown(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, res.Cancelled)
	require.False(t, res.AlreadyShutDown)
	for _, run := range runs {
		_, err := run.Outcome(ctx)
		require.ErrorIs(t, err, keel.ErrCancelled)
	}
	// A new session learns it from its first model turn: the run fails
	// having sent nothing, and the session refuses what follows.
	fresh := c2.Session("sd-new")
	run, err := fresh.Send(ctx, "hello", opt)
	require.NoError(t, err)
	o, err := run.Outcome(ctx)
	require.ErrorIs(t, err, keel.ErrRuntimeShutdown)
	require.Zero(t, o.Usage.Requests, "no model request was sent")
	_, err = fresh.Send(ctx, "hello again", opt)
	require.ErrorIs(t, err, keel.ErrRuntimeShutdown)
	sctx, scancel := context.WithTimeout(ctx, 20*time.Second)
	_, err = idle.Send(sctx, "hello again", opt)
	scancel()
	if !errors.Is(err, keel.ErrRuntimeShutdown) {
		it := c1.Temporal().GetWorkflowHistory(ctx, idle.ID(), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, _ := it.Next()
			t.Logf("history of %s: %d %s %v", idle.ID(), ev.GetEventId(), ev.GetEventType(), ev.GetAttributes())
		}
	}
	require.ErrorIs(t, err, keel.ErrRuntimeShutdown)
	res, err = c2.Shutdown(ctx)
	require.NoError(t, err)
	require.Equal(t, 0, res.Cancelled)
	require.True(t, res.AlreadyShutDown)
}

// waitVisible waits until visibility lists the sessions of ids as open,
// so the counts of shutdown and upgrade are deterministic. Visibility is
// an index Temporal updates asynchronously; there is no event to wait on,
// so this polls it.
func waitVisible(t *testing.T, ctx context.Context, c *client.Client, ids ...string) {
	t.Helper()
	require.Eventually(t, func() bool {
		resp, err := c.Temporal().ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: "WorkflowType = '" + api.SessionWorkflowName + "' AND ExecutionStatus = 'Running'"})
		if err != nil {
			return false
		}
		listed := map[string]bool{}
		for _, e := range resp.GetExecutions() {
			listed[e.GetExecution().GetWorkflowId()] = true
		}
		for _, id := range ids {
			if !listed[id] {
				return false
			}
		}
		return true
	}, 30*time.Second, 20*time.Millisecond)
}

func countOf(xs []string, x string) int {
	n := 0
	for _, v := range xs {
		if v == x {
			n++
		}
	}
	return n
}

// MoveIdleSessions asks every open session to move: an idle one continues
// as new at once (so its next execution starts on the current build) with
// everything it holds, and one running a run goes on with it.
func TestMoveIdleSessions(t *testing.T) {
	srv := keeltest.StartServer(t, devserver.Config{})
	book := &keeltest.ScriptBook{}
	keeltest.StartWorker(t, srv, keeltest.WorkerOptions{Models: book})
	c := keeltest.Client(t, srv, nil)
	ctx := testCtx(t)
	idle := c.Session("mv-idle")
	r, err := idle.Send(ctx, "x", client.WithConfig(api.RunConfig{Model: book.Add(t, "quick", `{"turns":[{"text":["hi"]}]}`)}))
	require.NoError(t, err)
	_, err = r.Outcome(ctx)
	require.NoError(t, err)
	busy, err := c.Session("mv-busy").Send(ctx, "sleep", client.WithConfig(api.RunConfig{
		Model: book.Add(t, "sleepy", `{"turns":[{"tool_calls":[{"id":"s","name":"sleep","arguments":{"seconds":3600}}]}]}`),
		Tools: []string{"sleep"}}))
	require.NoError(t, err)
	waitFor(t, ctx, busy, keel.TypeToolStarted)
	before, err := c.Temporal().DescribeWorkflowExecution(ctx, idle.ID(), "")
	require.NoError(t, err)
	busyBefore, err := c.Temporal().DescribeWorkflowExecution(ctx, busy.Session().ID(), "")
	require.NoError(t, err)
	waitVisible(t, ctx, c, "mv-idle", "mv-busy")

	n, err := c.MoveIdleSessions(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n, "every open session is asked")
	require.Eventually(t, func() bool {
		d, err := c.Temporal().DescribeWorkflowExecution(ctx, idle.ID(), "")
		return err == nil && d.GetWorkflowExecutionInfo().GetExecution().GetRunId() !=
			before.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	}, 30*time.Second, 20*time.Millisecond, "the idle session continued as new")
	st, err := idle.State(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, st.Runs)
	require.Equal(t, int64(1), st.Revision)
	require.Equal(t, "hi", st.Last.Text)
	bst, err := busy.State(ctx)
	require.NoError(t, err)
	require.Equal(t, keel.StateRunning, bst.State, "the busy session's run goes on")
	d, err := c.Temporal().DescribeWorkflowExecution(ctx, busy.Session().ID(), "")
	require.NoError(t, err)
	require.Equal(t, busyBefore.GetWorkflowExecutionInfo().GetExecution().GetRunId(),
		d.GetWorkflowExecutionInfo().GetExecution().GetRunId(), "the busy session's execution is the run's")
}

// The state of an inline run that is neither active nor the latest comes
// from its terminal event in the session's log.
func TestStateOfAnEarlierRun(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	sess := c.Session("earlier-run")
	model := shared.book.Add(t, t.Name(), `{"turns":[{"text":["first"]},{"text":["second"]}]}`)
	for _, prompt := range []string{"one", "two"} {
		run, err := sess.Send(ctx, prompt, client.WithConfig(api.RunConfig{Model: model}))
		require.NoError(t, err)
		_, err = run.Outcome(ctx)
		require.NoError(t, err)
	}
	st, err := sess.Run(1).State(ctx)
	require.NoError(t, err)
	require.Equal(t, keel.StateCompleted, st.State)
	require.Equal(t, "first", st.Outcome.Text)
	require.Equal(t, int64(1), st.Revision)
}
