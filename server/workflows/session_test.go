package workflows_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/carry"
)

// query runs a query and decodes its answer.
func query[T any](t *testing.T, e *runEnv, name string, args ...any) T {
	t.Helper()
	v, err := e.QueryWorkflow(name, args...)
	require.NoError(t, err, name)
	var out T
	require.NoError(t, v.Get(&out))
	return out
}

// update delivers an update and records how it ended: rejected, or
// completed with a value or an error.
type updateResult struct {
	rejected, err error
	value         any
	done          bool
}

func (e *runEnv) update(name, id string, out *updateResult, args ...any) {
	e.UpdateWorkflow(name, id, &testsuite.TestUpdateCallback{
		OnReject:   func(err error) { out.rejected, out.done = err, true },
		OnAccept:   func() {},
		OnComplete: func(v any, err error) { out.value, out.err, out.done = v, err, true },
	}, args...)
}

func keelCode(err error) keel.Code {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return keel.Code(appErr.Type())
	}
	return ""
}

// docs/contract.md §1: an inline session runs its run in its own
// execution, its log shows the run's events while it runs, and it
// continues as new right after the commit with everything the next
// execution needs; no Run workflow is started.
func TestSessionRunContinuesAsNew(t *testing.T) {
	e := newSessionEnv(t, napThen(`{"text":["one"],"usage":{"input_tokens":5,"output_tokens":2}}`), &memSegments{})
	var sent api.SendResult
	var during api.SessionStatus
	var live api.EventsPage
	e.RegisterDelayedCallback(func() { e.send(t, "first", api.SendRequest{Prompt: "hello"}, &sent) }, 0)
	e.RegisterDelayedCallback(func() {
		during = query[api.SessionStatus](t, e, api.QueryState)
		live = query[api.EventsPage](t, e, api.QueryEvents, api.EventsQuery{})
	}, 30*time.Second)
	e.ExecuteWorkflow(api.SessionWorkflowName, sessionInput("s1", napConfig))

	require.NotEmpty(t, sent.Execution)
	sent.Execution = ""
	require.Equal(t, api.SendResult{RunID: "s1/run-1", Number: 1, Revision: 0, BaseSeq: 0}, sent)
	require.Equal(t, &api.RunRef{RunID: "s1/run-1", Number: 1, BaseSeq: 0}, during.ActiveRun)
	require.Equal(t, keel.StateRunning, during.State)
	require.NotNil(t, during.Run, "the state query shows the active run")
	require.Equal(t, 1, during.Run.Step)
	require.Equal(t, int64(0), during.LastSeq, "nothing is committed yet")
	require.Equal(t, during.Run.LastSeq, live.Snapshot, "the log holds the run's events as they happen")
	require.Equal(t, keel.TypeRunStarted, live.Events[0].Type)
	require.Equal(t, keel.TypeToolStarted, live.Events[len(live.Events)-1].Type)

	in := continuedAs(t, e)
	c := in.Carry
	require.Equal(t, 1, c.Runs)
	require.Equal(t, int64(1), c.Revision)
	require.Equal(t, keel.StatusCompleted, c.Last.Status)
	require.Equal(t, "one", c.Last.Text)
	require.Equal(t, keel.StateCompleted, c.State)
	require.Len(t, c.Transcript, 4, "prompt, call, result, answer")
	require.Empty(t, c.Segments, "a small tail travels in the input")
	checkLog(t, 0, c.Tail)
	require.Equal(t, c.Seq, c.Tail[len(c.Tail)-1].Seq)
	require.Equal(t, "s1/run-1", c.Tail[0].RunID)
}

// A prompt queued during the run is carried, and the next execution runs
// it as run 2, numbered after the carried log, then moves on again.
func TestSessionQueuedPromptRunsInTheNextExecution(t *testing.T) {
	script := napThen(`{"text":["one"]}`, `{"text":["two"]}`)
	e := newSessionEnv(t, script, &memSegments{})
	var first, queued api.SendResult
	e.RegisterDelayedCallback(func() { e.send(t, "first", api.SendRequest{Prompt: "hello"}, &first) }, 0)
	e.RegisterDelayedCallback(func() {
		e.send(t, "queued", api.SendRequest{Prompt: "and then", IfActive: api.IfActiveQueue}, &queued)
	}, time.Second)
	e.ExecuteWorkflow(api.SessionWorkflowName, sessionInput("s1", napConfig))
	require.Equal(t, api.SendResult{RunID: "s1/run-2", Number: 2, Queued: true}, queued)
	in := continuedAs(t, e)
	require.Equal(t, []api.SendRequest{{Prompt: "and then", IfActive: api.IfActiveQueue}}, in.Carry.Queue)
	seq := in.Carry.Seq

	next := newSessionEnv(t, script, &memSegments{})
	next.ExecuteWorkflow(api.SessionWorkflowName, in)
	c := continuedAs(t, next).Carry
	require.Equal(t, 2, c.Runs)
	require.Empty(t, c.Queue)
	require.Equal(t, "two", c.Last.Text)
	require.Equal(t, "s1/run-2", c.Last.RunID)
	require.Equal(t, int64(2), c.Revision)
	checkLog(t, seq, c.Tail[seq:])
	require.Len(t, c.Transcript, 6)
}

// The run's commands are addressed to the session: steering reaches the
// active run, an idle session refuses it with keel.NotAccepting, and the
// cancel signal cancels the run while the session lives on.
func TestSessionCommandsReachTheRun(t *testing.T) {
	e := newSessionEnv(t, napThen(`{"text":["one"]}`, `{"text":["two"]}`), &memSegments{})
	var sent api.SendResult
	var idle, steer, stale, huge updateResult
	e.RegisterDelayedCallback(func() {
		e.update(api.UpdateSteer, "idle", &idle, api.SteerRequest{Text: "too early"})
		e.send(t, "first", api.SendRequest{Prompt: "hello"}, &sent)
	}, 0)
	e.RegisterDelayedCallback(func() {
		e.update(api.UpdateSteer, "steer", &steer, api.SteerRequest{Text: "stop there", RunID: "s1/run-1"})
		e.update(api.UpdateSteer, "stale", &stale, api.SteerRequest{Text: "for an old run", RunID: "s1/run-0"})
		// Attack: a run ID of a megabyte is refused without being echoed.
		e.update(api.UpdateSteer, "huge", &huge, api.SteerRequest{Text: "x", RunID: strings.Repeat("r", 1<<20)})
	}, time.Second)
	// A cancel naming another run changes nothing; the plain one cancels.
	e.RegisterDelayedCallback(func() {
		e.SignalWorkflow(api.SignalCancel, api.CancelRequest{RunID: "s1/run-0"})
	}, 2*time.Second)
	e.RegisterDelayedCallback(func() {
		st := query[api.SessionStatus](t, e, api.QueryState)
		require.Equal(t, keel.StateRunning, st.State, "a stale cancel reached the run")
		require.Equal(t, []string{steer.value.(api.SteerResult).SteeringID}, st.Run.Staged)
		e.SignalWorkflow(api.SignalCancel, nil)
	}, 3*time.Second)
	e.ExecuteWorkflow(api.SessionWorkflowName, sessionInput("s1", napConfig))

	require.True(t, idle.done)
	require.Equal(t, keel.CodeNotAccepting, keelCode(idle.rejected), "idle: %v", idle.rejected)
	require.NoError(t, steer.rejected)
	require.NoError(t, steer.err)
	require.NotEmpty(t, steer.value.(api.SteerResult).SteeringID)
	require.Equal(t, keel.CodeNotAccepting, keelCode(stale.rejected), "stale: %v", stale.rejected)
	require.Equal(t, keel.CodeNotAccepting, keelCode(huge.rejected))
	require.Less(t, len(huge.rejected.Error()), 300, "the refusal echoes a clipped run ID")
	c := continuedAs(t, e).Carry
	require.Equal(t, keel.StatusCancelled, c.Last.Status)
	require.Equal(t, keel.TypeRunCancelled, c.Tail[len(c.Tail)-1].Type)
}

// The Web UI's Cancel (a Temporal cancellation of the current execution)
// cancels the run cooperatively; the session continues as new.
func TestSessionTemporalCancelCancelsTheRunOnly(t *testing.T) {
	e := newSessionEnv(t, napThen(`{"text":["one"]}`), &memSegments{})
	var sent api.SendResult
	e.RegisterDelayedCallback(func() { e.send(t, "first", api.SendRequest{Prompt: "hello"}, &sent) }, 0)
	e.RegisterDelayedCallback(e.CancelWorkflow, time.Second)
	e.ExecuteWorkflow(api.SessionWorkflowName, sessionInput("s1", napConfig))
	c := continuedAs(t, e).Carry
	require.Equal(t, keel.StatusCancelled, c.Last.Status)
	checkLog(t, 0, c.Tail)
}

// The outcome update answers a run's outcome once it is committed; for a
// queued run, which a later execution runs, it says to ask again; for a
// run the session never accepted, it is refused before history.
func TestSessionOutcome(t *testing.T) {
	e := newSessionEnv(t, napThen(`{"text":["one"]}`), &memSegments{})
	var first, queued api.SendResult
	var own, later, unknown, nowait updateResult
	e.RegisterDelayedCallback(func() { e.send(t, "first", api.SendRequest{Prompt: "hello"}, &first) }, 0)
	e.RegisterDelayedCallback(func() {
		e.send(t, "queued", api.SendRequest{Prompt: "and then", IfActive: api.IfActiveQueue}, &queued)
		e.update(api.UpdateOutcome, "own", &own, api.OutcomeRequest{Run: 1})
		e.update(api.UpdateOutcome, "later", &later, api.OutcomeRequest{Run: 2})
		e.update(api.UpdateOutcome, "unknown", &unknown, api.OutcomeRequest{Run: 3})
		e.update(api.UpdateOutcome, "nowait", &nowait, api.OutcomeRequest{Run: 1, NoWait: true})
	}, time.Second)
	e.ExecuteWorkflow(api.SessionWorkflowName, sessionInput("s1", napConfig))
	continuedAs(t, e)

	require.NoError(t, own.rejected)
	require.NoError(t, own.err)
	o := own.value.(keel.Outcome)
	require.Equal(t, keel.StatusCompleted, o.Status)
	require.Equal(t, "s1/run-1", o.RunID)
	require.Equal(t, "one", o.Text)

	require.NoError(t, later.rejected)
	require.Equal(t, keel.Code(api.ErrTypeMoved), keelCode(later.err), "later: %v", later.err)

	require.Equal(t, keel.CodeNotFound, keelCode(unknown.rejected), "unknown: %v", unknown.rejected)
	require.Equal(t, keel.CodeRunActive, keelCode(nowait.rejected), "no wait while it runs: %v", nowait.rejected)
}

// A final text longer than api.MaxOutcomeText comes cut from the outcome
// update, flagged, with the sequence of the terminal event that holds it
// whole; the carried outcome keeps it whole.
func TestSessionOutcomeCutsALongText(t *testing.T) {
	long := strings.Repeat("é", api.MaxOutcomeText) // two bytes a character
	e := newSessionEnv(t, napThen(`{"text":["`+long+`"]}`), &memSegments{})
	var first api.SendResult
	var own updateResult
	e.RegisterDelayedCallback(func() {
		e.send(t, "first", api.SendRequest{Prompt: "hello"}, &first)
		e.update(api.UpdateOutcome, "own", &own, api.OutcomeRequest{Run: 1})
	}, 0)
	e.ExecuteWorkflow(api.SessionWorkflowName, sessionInput("s1", napConfig))
	c := continuedAs(t, e).Carry

	require.NoError(t, own.err)
	o := own.value.(keel.Outcome)
	require.True(t, o.TextCut)
	require.Equal(t, long[:api.MaxOutcomeText], o.Text, "cut at a character boundary")
	require.True(t, utf8.ValidString(o.Text))
	require.Equal(t, c.Seq, o.Seq, "the terminal event is the last one")
	require.Equal(t, long, c.Last.Text)
	require.False(t, c.Last.TextCut)
	term := c.Tail[len(c.Tail)-1]
	require.Equal(t, o.Seq, term.Seq)
	ev, err := term.Event()
	require.NoError(t, err)
	require.Equal(t, long, ev.(keel.RunCompleted).Text)
}

// Attack: a caller that opens outcome updates until Temporal's in-flight
// limit is full would leave no room for sends and commands. The session
// lets api.MaxOutcomeWaiters wait and refuses the next with keel.TooMany;
// one that does not wait, or waits for a run that has ended, still passes.
func TestSessionOutcomeWaitersAreBounded(t *testing.T) {
	e := newSessionEnv(t, napThen(`{"text":["one"]}`), &memSegments{})
	var first api.SendResult
	waiting := make([]updateResult, api.MaxOutcomeWaiters)
	var over, steer updateResult
	e.RegisterDelayedCallback(func() { e.send(t, "first", api.SendRequest{Prompt: "hello"}, &first) }, 0)
	e.RegisterDelayedCallback(func() {
		for i := range waiting {
			e.update(api.UpdateOutcome, fmt.Sprint("wait-", i), &waiting[i], api.OutcomeRequest{Run: 1})
		}
		e.update(api.UpdateOutcome, "over", &over, api.OutcomeRequest{Run: 1})
		e.update(api.UpdateSteer, "steer", &steer, api.SteerRequest{Text: "still heard"})
	}, time.Second)
	e.ExecuteWorkflow(api.SessionWorkflowName, sessionInput("s1", napConfig))
	continuedAs(t, e)

	for i, w := range waiting {
		require.NoError(t, w.rejected, "waiter %d", i)
		require.NoError(t, w.err, "waiter %d", i)
		require.Equal(t, "one", w.value.(keel.Outcome).Text)
	}
	require.Equal(t, keel.CodeTooMany, keelCode(over.rejected), "over the limit: %v", over.rejected)
	require.NoError(t, steer.rejected)
}

// The move signal makes an idle execution continue as new at once with
// what it holds (keel upgrade); during a run it changes nothing, and the
// execution moves on after the run as always.
func TestSessionMoveSignal(t *testing.T) {
	e := newSessionEnv(t, napThen(`{"text":["one"]}`), &memSegments{})
	var sent api.SendResult
	e.RegisterDelayedCallback(func() { e.send(t, "first", api.SendRequest{Prompt: "hello"}, &sent) }, 0)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(api.SignalMove, nil) }, time.Second)
	e.ExecuteWorkflow(api.SessionWorkflowName, sessionInput("s1", napConfig))
	in := continuedAs(t, e)
	require.Equal(t, 1, in.Carry.Runs, "the run finished first")
	require.Equal(t, keel.StatusCompleted, in.Carry.Last.Status)

	idle := newSessionEnv(t, napThen(`{"text":["one"]}`), &memSegments{})
	idle.RegisterDelayedCallback(func() { idle.SignalWorkflow(api.SignalMove, nil) }, time.Minute)
	idle.ExecuteWorkflow(api.SessionWorkflowName, in)
	moved := continuedAs(t, idle)
	require.Equal(t, in.Carry.HandOvers+1, moved.Carry.HandOvers)
	moved.Carry.HandOvers = in.Carry.HandOvers
	require.Equal(t, in.Carry, moved.Carry, "an idle move carries everything on unchanged")
}

// The outcome update answers any of the session's last
// api.OutcomesRemembered runs, carried across continue-as-new, as plain
// JSON; an older run gets a typed answer that says where its outcome is
// (docs/contract.md §3).
func TestOutcomeOfEarlierRuns(t *testing.T) {
	e := newSessionEnv(t, napThen(`{"text":["one"]}`), &memSegments{})
	var first api.SendResult
	e.RegisterDelayedCallback(func() { e.send(t, "first", api.SendRequest{Prompt: "hello"}, &first) }, 0)
	e.ExecuteWorkflow(api.SessionWorkflowName, sessionInput("s1", napConfig))
	in := continuedAs(t, e)
	require.Len(t, in.Carry.Outcomes, 1)
	require.Equal(t, "one", in.Carry.Outcomes[0].Text)

	// The session as it would be after 70 runs: it remembers the last 64.
	c := *in.Carry
	c.Runs = 70
	c.Outcomes = nil
	for n := 1; n <= c.Runs; n++ {
		o := keel.Outcome{RunID: keel.RunID("s1", n), Number: n, Status: keel.StatusCompleted, Text: fmt.Sprint("run ", n)}
		c.Outcomes = append(c.Outcomes, o)
		c.Last = &o
	}
	c.Outcomes = c.Outcomes[len(c.Outcomes)-api.OutcomesRemembered:]
	idle := newSessionEnv(t, napThen(`{"text":["one"]}`), &memSegments{})
	var recent, oldest, forgotten, unknown updateResult
	idle.RegisterDelayedCallback(func() {
		idle.update(api.UpdateOutcome, "recent", &recent, api.OutcomeRequest{Run: 69, NoWait: true})
		idle.update(api.UpdateOutcome, "oldest", &oldest, api.OutcomeRequest{Run: 7})
		idle.update(api.UpdateOutcome, "forgotten", &forgotten, api.OutcomeRequest{Run: 6})
		idle.update(api.UpdateOutcome, "unknown", &unknown, api.OutcomeRequest{Run: 71})
	}, time.Second)
	idle.RegisterDelayedCallback(func() { idle.SignalWorkflow(api.SignalMove, nil) }, time.Minute)
	idle.ExecuteWorkflow(api.SessionWorkflowName, carry.SessionInput{Shape: api.ShapeLean, SessionID: "s1", Config: napConfig, Carry: &c})
	moved := continuedAs(t, idle)

	require.NoError(t, recent.rejected)
	require.Equal(t, "run 69", recent.value.(keel.Outcome).Text)
	require.NoError(t, oldest.rejected)
	require.Equal(t, "run 7", oldest.value.(keel.Outcome).Text)
	require.Equal(t, keel.CodeNotFound, keelCode(forgotten.rejected), "forgotten: %v", forgotten.rejected)
	require.Contains(t, forgotten.rejected.Error(), "older than the last 64 runs")
	require.Equal(t, keel.CodeNotFound, keelCode(unknown.rejected), "unknown: %v", unknown.rejected)
	require.Equal(t, c.Outcomes, moved.Carry.Outcomes, "carried on unchanged")
}
