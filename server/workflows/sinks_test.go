package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/carry"
	"github.com/keelrun/keel/internal/delegation"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/hook"
	"github.com/keelrun/keel/server/tool"
	"github.com/keelrun/keel/server/worker"
	"github.com/keelrun/keel/server/workflows"
)

// recordingSink is an event sink that records every delivery it took, in
// order. fail, if set, refuses a delivery with its error; hang, if set,
// holds every delivery until it is closed (entered is closed once one
// is held).
type recordingSink struct {
	fail    func(sessionID string) error
	hang    chan struct{}
	entered chan struct{}

	mu       sync.Mutex
	took     []sinkDelivery
	failures int
	once     sync.Once
}

type sinkDelivery struct {
	session string
	events  []keel.Envelope
}

func (s *recordingSink) Deliver(ctx context.Context, sessionID string, events []keel.Envelope) error {
	if s.hang != nil {
		s.once.Do(func() { close(s.entered) })
		select {
		case <-s.hang:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if s.fail != nil {
		if err := s.fail(sessionID); err != nil {
			s.mu.Lock()
			s.failures++
			s.mu.Unlock()
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.took = append(s.took, sinkDelivery{session: sessionID, events: append([]keel.Envelope(nil), events...)})
	return nil
}

// received returns the events of session the sink took, each once, having
// checked what a sink may rely on: each delivery is dense and starts no
// later than right after the last new event it had (repeats are allowed,
// gaps never).
func (s *recordingSink) received(t *testing.T, session string) []keel.Envelope {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []keel.Envelope
	var high int64
	for _, d := range s.took {
		if d.session != session {
			continue
		}
		require.NotEmpty(t, d.events)
		require.LessOrEqual(t, d.events[0].Seq, high+1, "a delivery of %s skipped past %d", session, high)
		for i, ev := range d.events {
			require.Equal(t, d.events[0].Seq+int64(i), ev.Seq, "a delivery of %s is not dense", session)
			if ev.Seq > high {
				out = append(out, ev)
				high = ev.Seq
			}
		}
	}
	return out
}

func (s *recordingSink) deliveries() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.took)
}

// envLog reads sessions' logs as the worker's does, through the events
// query, asked on the test environment's main loop between workflow
// tasks (as a worker answers a query) rather than from the activity's
// goroutine.
type envLog struct {
	env  *testsuite.TestWorkflowEnvironment
	segs *memSegments
	// stop ends reads once the test is over and nothing answers them.
	stop <-chan struct{}
}

func (l envLog) EventsPage(ctx context.Context, sessionID string, q api.EventsQuery) (api.EventsPage, error) {
	type answer struct {
		page api.EventsPage
		err  error
	}
	ch := make(chan answer, 1)
	l.env.RegisterDelayedCallback(func() {
		var a answer
		v, err := l.env.QueryWorkflowByID(sessionID, api.QueryEvents, q)
		if a.err = err; err == nil {
			a.err = v.Get(&a.page)
		}
		ch <- a
	}, 0)
	select {
	case a := <-ch:
		return a.page, a.err
	case <-ctx.Done():
		return api.EventsPage{}, ctx.Err()
	case <-l.stop:
		return api.EventsPage{}, errors.New("the test is over")
	}
}

func (l envLog) Segment(_ context.Context, seg api.EventSegment) ([]keel.Envelope, error) {
	l.segs.mu.Lock()
	defer l.segs.mu.Unlock()
	evs, ok := l.segs.segs[seg.Key]
	if !ok {
		return nil, errors.New("no such segment")
	}
	return evs, nil
}

// sinkSetup is a worker for the sinks' tests: the sinks it has, the names
// its rules record (which may name one it lacks), its models, agents and
// extra tools.
type sinkSetup struct {
	sinks  map[string]hook.Sink
	names  []string
	models activities.ModelResolver
	agents map[string]delegation.AgentSpec
	tools  []tool.Tool
}

// newSinkEnv returns a test environment of a worker with event sinks, a
// content store for segments (shared with the environments of the
// session's other executions through segs) and the session's workflow
// ID "s1".
func newSinkEnv(t *testing.T, w sinkSetup, segs *memSegments) *runEnv {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	mem := live.NewMemory()
	t.Cleanup(func() { _ = mem.Close() })
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	tools := testTools(t, w.tools...)
	for _, a := range w.agents {
		require.NoError(t, tools.Register(tool.AgentTool(a.Name, a.Description, a.Detached)))
	}
	acts := &activities.Activities{Models: w.models, Tools: tools, Live: mem, Segments: segs, Agents: w.agents,
		Sinks: w.sinks, Logs: envLog{env: env, segs: segs, stop: stop}}
	worker.RegisterWithRules(env, acts, workflows.Rules{Agents: w.agents, Sinks: w.names})
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "s1"})
	return &runEnv{TestWorkflowEnvironment: env, live: mem, acts: acts}
}

// idleUntilDelivered runs an idle execution of the session from c: it
// delivers what the previous one left, and moves (continues as new) an
// hour later by the test clock, which stands still while a delivery runs.
// It returns the state it handed over.
func idleUntilDelivered(t *testing.T, w sinkSetup, segs *memSegments, c *carry.SessionCarry) *carry.SessionCarry {
	t.Helper()
	e := newSinkEnv(t, w, segs)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(api.SignalMove, nil) }, time.Hour)
	e.ExecuteWorkflow(api.SessionWorkflowName, carry.SessionInput{Shape: api.ShapeLean, SessionID: "s1", Carry: c})
	return continuedAs(t, e).Carry
}

func seqTypes(evs []keel.Envelope) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.RunID + " " + ev.Type
	}
	return out
}

const echoThenDone = `{"repeat":true,"turns":[
  {"tool_calls":[{"id":"e","name":"echo","arguments":{"text":"hi"}}]},
  {"text":["done"]}]}`

// docs/contract.md §23.6: a session's durable events reach each sink in
// sequence order, each of 1..N, across two runs and the hand-overs after
// them (the idle execution after the second delivers what it left).
func TestSinkGetsEveryEventInOrderAcrossContinueAsNew(t *testing.T) {
	sink := &recordingSink{}
	segs := &memSegments{}
	w := sinkSetup{sinks: map[string]hook.Sink{"audit": sink}, names: []string{"audit"},
		models: scriptModels{scriptedProvider(t, echoThenDone)}}
	first := newSinkEnv(t, w, segs).execSession(t, promptOf("one", "echo"))
	second := newSinkEnv(t, w, segs).execSession(t, sessionSend{Prompt: "two",
		Config: api.RunConfig{Model: "scripted:test", Tools: []string{"echo"}}, Carry: first.Carry})
	last := idleUntilDelivered(t, w, segs, second.Carry)

	require.Equal(t, 2, last.Runs)
	require.Equal(t, map[string]int64{"audit": last.Seq}, last.Sinks, "the cursor reached the log's end")
	log := newSinkEnv(t, w, segs).storedEvents(t, last)
	require.Len(t, log, int(last.Seq))
	got := sink.received(t, "s1")
	require.Equal(t, seqTypes(log), seqTypes(got), "the sink got the session's log, each event in order")
	require.Equal(t, log, got)
}

// A sink down for a while (by the test clock) fails every delivery
// meanwhile; Temporal retries them, and once it is back it gets
// everything, in order, from where it was. Down for five minutes, the
// delivery outlives its retries (the test environment stops at ten
// attempts, as the 24 h schedule-to-close would): the session waits and
// delivers again from the same cursor.
func TestSinkDownForAWhileGetsEverythingAfterwards(t *testing.T) {
	for _, tc := range []struct {
		down        time.Duration
		minFailures int
	}{
		{time.Minute, 5},      // 1 s, 2 s, 4 s, 8 s, 16 s, 30 s apart
		{5 * time.Minute, 11}, // more than one activity's ten attempts
	} {
		t.Run(tc.down.String(), func(t *testing.T) {
			sink := &recordingSink{}
			segs := &memSegments{}
			nap := 2 * tc.down
			script := fmt.Sprintf(`{"turns":[
			  {"tool_calls":[{"id":"nap","name":"sleep","arguments":{"seconds":%d}}]},
			  {"text":["done"]}]}`, int(nap.Seconds()))
			w := sinkSetup{sinks: map[string]hook.Sink{"audit": sink}, names: []string{"audit"},
				models: scriptModels{scriptedProvider(t, script)}}
			e := newSinkEnv(t, w, segs)
			back := e.Now().Add(tc.down)
			var firstTaken atomic.Pointer[time.Time]
			sink.fail = func(string) error {
				now := e.Now()
				if now.Before(back) {
					return errors.New("sink down")
				}
				firstTaken.CompareAndSwap(nil, &now)
				return nil
			}
			run := e.execSession(t, sessionSend{Prompt: "nap", Config: api.RunConfig{Model: "scripted:test", Tools: []string{"sleep"}}})
			require.Equal(t, keel.StatusCompleted, run.Outcome.Status)
			// The run's own durable timer is not held up by the failing
			// sink: it ends when the sleep says.
			end, _ := at(run.Events, keel.TypeRunCompleted, 0)
			start, _ := at(run.Events, keel.TypeRunStarted, 0)
			require.Less(t, end.Sub(start), nap+time.Second)

			last := idleUntilDelivered(t, w, segs, run.Carry)
			sink.mu.Lock()
			failures := sink.failures
			sink.mu.Unlock()
			require.GreaterOrEqual(t, failures, tc.minFailures, "deliveries failed while the sink was down")
			require.NotNil(t, firstTaken.Load())
			require.False(t, firstTaken.Load().Before(back), "nothing was taken while the sink was down")
			require.Less(t, firstTaken.Load().Sub(back), nap-tc.down, "the sink got its events while the run slept")
			got := sink.received(t, "s1")
			require.Equal(t, last.Seq, int64(len(got)))
			require.Equal(t, newSinkEnv(t, w, segs).storedEvents(t, last), got)
		})
	}
}

// A sink that hangs never holds up the run: the run ends, the session
// commits it and hands over while the first delivery is still stuck.
func TestSinkThatHangsNeverDelaysTheRun(t *testing.T) {
	sink := &recordingSink{hang: make(chan struct{}), entered: make(chan struct{})}
	t.Cleanup(func() { close(sink.hang) })
	type noArgs struct{}
	// The run's tool waits until the sink holds a delivery, so the rest of
	// the run happens while it is stuck.
	stuck := tool.New("await_sink", "Waits for the sink to hang.", func(ctx context.Context, _ noArgs) (string, error) {
		select {
		case <-sink.entered:
			return "the sink hangs", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
	script := `{"turns":[
	  {"tool_calls":[{"id":"w","name":"await_sink","arguments":{}}]},
	  {"text":["done"]}]}`
	w := sinkSetup{sinks: map[string]hook.Sink{"audit": sink}, names: []string{"audit"},
		models: scriptModels{scriptedProvider(t, script)}, tools: []tool.Tool{stuck}}
	run := newSinkEnv(t, w, &memSegments{}).execSession(t, promptOf("go", "await_sink"))

	require.Equal(t, keel.StatusCompleted, run.Outcome.Status)
	require.Equal(t, "done", run.Outcome.Text)
	select {
	case <-sink.entered:
	default:
		t.Fatal("no delivery was made")
	}
	require.Zero(t, sink.deliveries(), "the stuck delivery has not returned")
	require.Zero(t, run.Carry.Sinks["audit"], "the cursor stays where the stuck delivery started")
}

// A sink the session recorded but the worker running the delivery lacks
// (removed from its configuration): the delivery fails at once and is not
// tried again (not in the two minutes the run then sleeps, when a failing
// sink's would be, 1 s, 2 s, 4 s, … apart), the cursor stays, and the
// other sink gets everything.
func TestSinkNotOfferedStopsItsDeliveries(t *testing.T) {
	sink := &recordingSink{}
	segs := &memSegments{}
	refused := make(chan struct{})
	var once sync.Once
	type noArgs struct{}
	// The run goes on once the refusal is in, so it happens within it.
	await := tool.New("await_refusal", "Waits for the refusal.", func(ctx context.Context, _ noArgs) (string, error) {
		select {
		case <-refused:
			return "refused", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
	script := `{"turns":[
	  {"tool_calls":[{"id":"w","name":"await_refusal","arguments":{}}]},
	  {"tool_calls":[{"id":"nap","name":"sleep","arguments":{"seconds":120}}]},
	  {"text":["done"]}]}`
	w := sinkSetup{sinks: map[string]hook.Sink{"audit": sink}, names: []string{"audit", "gone"},
		models: scriptModels{scriptedProvider(t, script)}, tools: []tool.Tool{await}}
	e := newSinkEnv(t, w, segs)
	var attempts atomic.Int32
	e.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, args converter.EncodedValues) {
		var in activities.DeliverEventsInput
		if info.ActivityType.Name == activities.DeliverEventsName && args.Get(&in) == nil && in.Sink == "gone" {
			attempts.Add(1)
		}
	})
	e.SetOnActivityCompletedListener(func(info *activity.Info, _ converter.EncodedValue, err error) {
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) && appErr.Type() == activities.ErrSinkNotOffered {
			once.Do(func() { close(refused) })
		}
	})
	// The session carries a sink an earlier worker named, which this one
	// does not offer.
	run := e.execSession(t, sessionSend{Prompt: "one",
		Config: api.RunConfig{Model: "scripted:test", Tools: []string{"await_refusal", "sleep"}},
		Carry:  &carry.SessionCarry{State: keel.StateIdle, SinkNames: []string{"audit", "gone"}}})
	require.Equal(t, keel.StatusCompleted, run.Outcome.Status)
	require.Equal(t, int32(1), attempts.Load(), "one delivery to the missing sink, refused and not tried again")
	last := idleUntilDelivered(t, w, segs, run.Carry)
	require.Equal(t, map[string]int64{"audit": last.Seq}, last.Sinks, "the missing sink's cursor stays at 0")
	require.Len(t, sink.received(t, "s1"), int(last.Seq))
}

// A child session ends its workflow after its one run, perhaps before its
// sinks have its last events (here: its sink refuses the child's events
// until the child has ended). It hands its cursors to its parent with its
// result, and the parent delivers the rest of the child's log.
func TestParentDeliversTheRestOfItsChildsLog(t *testing.T) {
	var childEnded atomic.Bool
	sink := &recordingSink{fail: func(session string) error {
		if session != "s1" && !childEnded.Load() {
			return errors.New("not yet")
		}
		return nil
	}}
	planner := scriptedProvider(t, `{"turns":[
	  {"tool_calls":[{"id":"c1","name":"agent__researcher","arguments":{"task":"facts"}}]},
	  {"tool_calls":[{"id":"nap","name":"sleep","arguments":{"seconds":3600}}]},
	  {"text":["done"]}]}`)
	researcher := scriptedProvider(t, `{"turns":[{"text":["the facts"]}]}`)
	agents := map[string]delegation.AgentSpec{
		"planner":    {Name: "planner", Model: "scripted:planner", Tools: []string{"agent__researcher", "sleep"}, Agents: []string{"researcher"}},
		"researcher": {Name: "researcher", Model: "scripted:researcher"},
	}
	w := sinkSetup{sinks: map[string]hook.Sink{"audit": sink}, names: []string{"audit"},
		models: specModels{"scripted:planner": planner, "scripted:researcher": researcher}, agents: agents}
	segs := &memSegments{}
	e := newSinkEnv(t, w, segs)
	var handed []delegation.SinkLog
	e.SetOnChildWorkflowCompletedListener(func(_ *workflow.Info, result converter.EncodedValue, err error) {
		var res delegation.DelegationResult
		require.NoError(t, err)
		require.NoError(t, result.Get(&res))
		handed = res.Undelivered
		childEnded.Store(true)
	})
	run := e.execSession(t, sessionSend{Prompt: "plan", Config: api.RunConfig{Agent: "planner"}})
	require.Equal(t, keel.StatusCompleted, run.Outcome.Status)

	require.Len(t, handed, 1, "the child handed back its log")
	childID := handed[0].SessionID
	require.NotEqual(t, "s1", childID)
	require.Zero(t, handed[0].Sinks["audit"], "its sink had none of it when it ended")
	got := sink.received(t, childID)
	require.Equal(t, handed[0].Seq, int64(len(got)), "the parent delivered the child's whole log")
	require.Equal(t, keel.TypeRunStarted, got[0].Type)
	require.True(t, got[len(got)-1].Terminal())
	require.Nil(t, run.Carry.SinkLogs, "and forgot it once delivered")
}
