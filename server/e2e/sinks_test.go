package e2e_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/activity"
	sdkclient "go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/internal/testlog"
	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/hook"
	"github.com/keelrun/keel/server/internal/keeltest"
	"github.com/keelrun/keel/server/internal/stack"
	"github.com/keelrun/keel/server/store"
	"github.com/keelrun/keel/server/tool"
	"github.com/keelrun/keel/server/worker"
)

// collectingSink is an event sink in the test process: it keeps every
// delivery by session, in order, and lets a test wait until a session's
// log reached it up to a sequence.
type collectingSink struct {
	mu      sync.Mutex
	took    map[string][][]keel.Envelope
	high    map[string]int64
	changed chan struct{} // closed at every delivery, then replaced
}

func newCollectingSink() *collectingSink {
	return &collectingSink{took: map[string][][]keel.Envelope{}, high: map[string]int64{}, changed: make(chan struct{})}
}

func (s *collectingSink) Deliver(_ context.Context, sessionID string, events []keel.Envelope) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.took[sessionID] = append(s.took[sessionID], append([]keel.Envelope(nil), events...))
	s.high[sessionID] = max(s.high[sessionID], events[len(events)-1].Seq)
	close(s.changed)
	s.changed = make(chan struct{})
	return nil
}

// waitFor blocks until the sink has session's events up to seq.
func (s *collectingSink) waitFor(t *testing.T, ctx context.Context, session string, seq int64) {
	t.Helper()
	for {
		s.mu.Lock()
		high, changed := s.high[session], s.changed
		s.mu.Unlock()
		if high >= seq {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("the sink has %s up to %d, not %d", session, high, seq)
		}
	}
}

// received returns session's events as the sink has them, each once,
// having checked that every delivery was dense and started no later than
// right after the last new event before it: repeats, never gaps.
func (s *collectingSink) received(t *testing.T, session string) []keel.Envelope {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []keel.Envelope
	var high int64
	for _, d := range s.took[session] {
		require.LessOrEqual(t, d[0].Seq, high+1, "a delivery skipped past %d", high)
		for i, ev := range d {
			require.Equal(t, d[0].Seq+int64(i), ev.Seq, "a delivery is not dense")
			if ev.Seq > high {
				out, high = append(out, ev), ev.Seq
			}
		}
	}
	return out
}

// startSinkWorker starts a keel worker on srv, as keeltest.StartWorker
// does, playing script, with the event sinks given.
func startSinkWorker(t *testing.T, srv *devserver.Server, script string, sinks map[string]hook.Sink) *stack.Stack {
	t.Helper()
	return startWorkerWith(t, srv, worker.Options{Models: keeltest.ScriptModels(t, script), Sinks: sinks})
}

// startWorkerWith starts a keel worker on srv with opts, its tools the
// built-ins on a temporary workspace.
func startWorkerWith(t *testing.T, srv *devserver.Server, opts worker.Options) *stack.Stack {
	t.Helper()
	tools, err := tool.Builtins(t.TempDir())
	require.NoError(t, err)
	opts.Tools, opts.StopTimeout, opts.Logger = tools, time.Second, testlog.New(t)
	st, err := stack.Build(context.Background(), stack.Config{Server: srv,
		Store: stack.StoreConfig{Codec: keeltest.Codec(t, srv)}, Worker: &opts})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Stop() })
	return st
}

const sinkScript = `{"repeat":true,"turns":[
  {"text":["Waiting."],"tool_calls":[{"id":"nap","name":"sleep","arguments":{"seconds":2}}]},
  {"text":["Done ","waiting."]}]}`

// docs/contract.md §23.6: a worker stopped mid-run and another started
// in its place; the sink still gets every event of the session, at least
// once and in order, across the run, the hand-over (its events moved to
// the content store, a segment the delivery reads back) and a second
// run. The session's histories then replay on a worker that has no sinks:
// each execution recorded the sinks it delivered to.
func TestSinkGetsEverythingAcrossWorkerRestart(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	srv := keeltest.StartServer(t, devserver.Config{})
	sink := newCollectingSink()
	sinks := map[string]hook.Sink{"audit": sink}
	first := startSinkWorker(t, srv, sinkScript, sinks)
	tc := keeltest.Dial(t, srv)
	// Every hand-over moves the events to the content store.
	c, err := client.Dial(ctx, client.Options{Temporal: tc, DataConverter: store.NewDataConverter(keeltest.Codec(t, srv)),
		HandOver: api.HandOverLimits{TailBytes: 1}})
	require.NoError(t, err)
	sess := c.Session("sink-restart")

	run1, err := sess.Send(ctx, "wait", client.WithConfig(api.RunConfig{Tools: []string{"sleep"}}))
	require.NoError(t, err)
	followRun(ctx, run1).waitFor(t, ctx, "tool.started of the sleep", sawToolStarted("sleep"))
	require.NoError(t, first.Stop())
	startSinkWorker(t, srv, sinkScript, sinks)
	_, err = run1.Outcome(ctx)
	require.NoError(t, err)
	run2, err := sess.Send(ctx, "again", client.WithConfig(api.RunConfig{Tools: []string{"sleep"}}))
	require.NoError(t, err)
	_, err = run2.Outcome(ctx)
	require.NoError(t, err)

	log, err := sess.EventsAfter(ctx, 0)
	require.NoError(t, err)
	requireSessionLog(t, log)
	// The last events are delivered by the execution after run 2's.
	sink.waitFor(t, ctx, sess.ID(), log[len(log)-1].Seq)
	got := sink.received(t, sess.ID())
	require.Equal(t, types(log), types(got))
	require.Equal(t, log, got)

	replaySessionWithoutSinks(t, ctx, srv, tc, sess.ID())
}

// refusingSink takes no event of a session other than parent while that
// session's workflow runs: a child's sink never has its events before the
// child ends.
type refusingSink struct {
	*collectingSink
	parent string
	tc     sdkclient.Client
}

func (s refusingSink) Deliver(ctx context.Context, sessionID string, events []keel.Envelope) error {
	if sessionID != s.parent {
		d, err := s.tc.DescribeWorkflowExecution(ctx, sessionID, "")
		if err != nil {
			return err
		}
		if d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			return errors.New("not while the session runs")
		}
	}
	return s.collectingSink.Deliver(ctx, sessionID, events)
}

// docs/contract.md §23.6, §21.3: a child session ends its workflow after
// its one run, here before its sink took any of its events; its parent
// delivers the child's log, reading it from the child's closed
// workflow.
func TestParentDeliversItsChildsLog(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	srv := keeltest.StartServer(t, devserver.Config{})
	tc := keeltest.Dial(t, srv)
	sink := refusingSink{collectingSink: newCollectingSink(), parent: "sink-parent", tc: tc}
	var book keeltest.ScriptBook
	planner := book.Add(t, "sink-planner", `{"turns":[
	  {"tool_calls":[{"id":"c1","name":"agent__researcher","arguments":{"task":"facts"}}]},
	  {"text":["done"]}]}`)
	researcher := book.Add(t, "sink-researcher", `{"turns":[{"text":["the facts"]}]}`)
	startWorkerWith(t, srv, worker.Options{Models: &book, Sinks: map[string]hook.Sink{"audit": sink},
		Agents: map[string]worker.AgentSpec{
			"planner":    {Name: "planner", Model: planner, Tools: []string{"agent__researcher"}, Agents: []string{"researcher"}},
			"researcher": {Name: "researcher", Model: researcher},
		}})
	c := keeltest.Client(t, srv, nil)
	run, err := c.Session(sink.parent).Send(ctx, "plan", client.WithConfig(api.RunConfig{Agent: "planner"}))
	require.NoError(t, err)
	out, err := run.Outcome(ctx)
	require.NoError(t, err)
	require.Equal(t, "done", out.Text)

	log, err := run.Session().EventsAfter(ctx, 0)
	require.NoError(t, err)
	var childID string
	for _, ev := range log {
		if ev.Type == keel.TypeAgentStarted {
			childID = decode[keel.AgentStarted](ev).SessionID
		}
	}
	require.NotEmpty(t, childID)
	childLog, err := c.Session(childID).EventsAfter(ctx, 0)
	require.NoError(t, err)
	sink.waitFor(t, ctx, childID, childLog[len(childLog)-1].Seq)
	require.Equal(t, childLog, sink.received(t, childID))
	sink.waitFor(t, ctx, sink.parent, log[len(log)-1].Seq)
	require.Equal(t, log, sink.received(t, sink.parent))
}

// replaySessionWithoutSinks replays every closed execution of a session
// on a replayer registered as a worker without sinks.
func replaySessionWithoutSinks(t *testing.T, ctx context.Context, srv *devserver.Server, tc sdkclient.Client, id string) {
	t.Helper()
	desc, err := tc.DescribeWorkflowExecution(ctx, id, "")
	require.NoError(t, err)
	current := desc.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	r, err := sdkworker.NewWorkflowReplayerWithOptions(sdkworker.WorkflowReplayerOptions{
		DataConverter: store.NewDataConverter(keeltest.Codec(t, srv))})
	require.NoError(t, err)
	worker.Register(replayOnly{r}, &activities.Activities{})
	logger := tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	executions, deliveries := 0, 0
	for runID := desc.GetWorkflowExecutionInfo().GetFirstRunId(); runID != current; {
		h := &historypb.History{}
		it := tc.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			require.NoError(t, err)
			h.Events = append(h.Events, ev)
			if ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == activities.DeliverEventsName {
				deliveries++
			}
		}
		require.NoError(t, r.ReplayWorkflowHistory(logger, h), "execution %s", runID)
		executions++
		runID = h.Events[len(h.Events)-1].GetWorkflowExecutionContinuedAsNewEventAttributes().GetNewExecutionRunId()
		require.NotEmpty(t, runID)
	}
	require.GreaterOrEqual(t, executions, 2)
	require.Positive(t, deliveries, "the histories hold deliveries")
}

// replayOnly registers workflows on a replayer; activities do not run in
// a replay.
type replayOnly struct{ sdkworker.WorkflowReplayer }

func (replayOnly) RegisterActivityWithOptions(any, activity.RegisterOptions) {}

// TestRecordSinkHistory records a session's first execution delivering
// to an event sink (the sinks' names in its first Committed marker,
// DeliverEvents activities), for
// server/workflows/replay_test.go. It writes session_sinks.json.
func TestRecordSinkHistory(t *testing.T) {
	skipUnlessRecording(t)
	ctx := testContext(t, 2*time.Minute)
	data := t.TempDir()
	srv := keeltest.StartServer(t, devserver.Config{DataDir: data})
	sink := newCollectingSink()
	startSinkWorker(t, srv, sinkScript, map[string]hook.Sink{"audit": sink})
	c := keeltest.Client(t, srv, nil)
	run, err := c.Session("replay-sinks").Send(ctx, "wait", client.WithConfig(api.RunConfig{Tools: []string{"sleep"}}))
	require.NoError(t, err)
	_, err = run.Outcome(ctx)
	require.NoError(t, err)
	log, err := run.Session().EventsAfter(ctx, 0)
	require.NoError(t, err)
	sink.waitFor(t, ctx, run.Session().ID(), log[len(log)-1].Seq)
	writeRunExecution(t, ctx, c.Temporal(), run, data, "session_sinks.json")
	require.FileExists(t, filepath.Join("..", "workflows", "testdata", "session_sinks.json"))
}
