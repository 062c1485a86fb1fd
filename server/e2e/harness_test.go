package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	enumspb "go.temporal.io/api/enums/v1"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
	"github.com/keelrun/keel/server/natsserver"
)

// killStack is an embedded Temporal server, an embedded NATS server, a
// client in the test process, and worker processes started on demand.
type killStack struct {
	t      *testing.T
	srv    *devserver.Server
	live   *live.NATS
	client *client.Client
	spec   workerSpec // template of every worker process's spec
	gens   int
}

// newKillStack starts the servers (Temporal in memory) and writes script
// where worker processes read it.
func newKillStack(t *testing.T, script string) *killStack {
	t.Helper()
	return newKillStackOn(t, devserver.Config{}, script)
}

// newKillStackOn is newKillStack with the Temporal server configured by cfg.
func newKillStackOn(t *testing.T, cfg devserver.Config, script string) *killStack {
	t.Helper()
	srv := keeltest.StartServer(t, cfg)
	ns, err := natsserver.Start(natsserver.Options{Port: natsserver.RandomPort})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	ch, err := live.DialNATS(ns.ClientURL(), live.NATSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ch.Close() })
	dir := t.TempDir()
	scriptPath := filepath.Join(dir, "script.json")
	if err := os.WriteFile(scriptPath, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	workspace := filepath.Join(dir, "workspace")
	if err := os.Mkdir(workspace, 0o700); err != nil {
		t.Fatal(err)
	}
	return &killStack{
		t: t, srv: srv, live: ch,
		client: keeltest.Client(t, srv, ch),
		spec: workerSpec{
			Address: srv.Address(), Namespace: srv.Namespace(), Script: scriptPath, Workspace: workspace,
			NATSURL: ns.ClientURL(), TallyLog: filepath.Join(dir, "tally.log"),
		},
	}
}

// startWorker starts the next worker process.
func (s *killStack) startWorker() *workerProcess {
	s.t.Helper()
	s.gens++
	spec := s.spec
	spec.Generation = s.gens
	return startWorkerProcess(s.t, spec)
}

func (s *killStack) tally() []tallyLine { return readTally(s.t, s.spec.TallyLog) }

// testContext bounds a test; every wait below is also bounded by it.
func testContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// eventFollower records what a client following a stream sees, in order.
// Tests wait on what it saw, never on time.
type eventFollower struct {
	mu      sync.Mutex
	seen    []keel.Envelope
	err     error
	changed chan struct{} // closed at every change, then replaced
	done    chan struct{}
	cancel  context.CancelFunc
}

// follow consumes events in a goroutine until it ends or stop is called.
func follow(ctx context.Context, events func(context.Context) iter.Seq2[keel.Envelope, error]) *eventFollower {
	ctx, cancel := context.WithCancel(ctx)
	f := &eventFollower{changed: make(chan struct{}), done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(f.done)
		for ev, err := range events(ctx) {
			f.mu.Lock()
			if err != nil {
				var lag *live.LaggedError
				if !errors.As(err, &lag) && f.err == nil && ctx.Err() == nil {
					f.err = err
				}
			} else {
				f.seen = append(f.seen, ev)
			}
			close(f.changed)
			f.changed = make(chan struct{})
			f.mu.Unlock()
		}
	}()
	return f
}

// followRun follows one run from its first event to its terminal event.
func followRun(ctx context.Context, run *client.Run) *eventFollower {
	return follow(ctx, run.Events)
}

// waitFor blocks until cond holds for what was seen so far and returns it.
// It fails the test if the stream ends first or ctx expires.
func (f *eventFollower) waitFor(t *testing.T, ctx context.Context, what string, cond func([]keel.Envelope) bool) []keel.Envelope {
	t.Helper()
	for {
		f.mu.Lock()
		seen, changed, err := append([]keel.Envelope(nil), f.seen...), f.changed, f.err
		f.mu.Unlock()
		if cond(seen) {
			return seen
		}
		select {
		case <-changed:
		case <-f.done:
			f.mu.Lock()
			seen, err = f.seen, f.err
			f.mu.Unlock()
			if cond(seen) {
				return seen
			}
			t.Fatalf("event stream ended (err %v) before %s; saw %v", err, what, types(seen))
		case <-ctx.Done():
			t.Fatalf("gave up waiting for %s (err %v); saw %v", what, err, types(seen))
		}
	}
}

// wait waits for the stream to end and returns all it saw; it fails the
// test if the stream ended with an error.
func (f *eventFollower) wait(t *testing.T, ctx context.Context) []keel.Envelope {
	t.Helper()
	select {
	case <-f.done:
	case <-ctx.Done():
		t.Fatalf("event stream still open: %v", ctx.Err())
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		t.Fatalf("event stream failed: %v (after %v)", f.err, types(f.seen))
	}
	return f.seen
}

// stop ends the stream and returns what it saw.
func (f *eventFollower) stop() []keel.Envelope {
	f.cancel()
	<-f.done
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen
}

func countDurable(n int) func([]keel.Envelope) bool {
	return func(seen []keel.Envelope) bool { return len(durable(seen)) >= n }
}

func sawToolStarted(name string) func([]keel.Envelope) bool {
	return func(seen []keel.Envelope) bool {
		for _, ev := range seen {
			if ev.Type == keel.TypeToolStarted && decode[keel.ToolStarted](ev).Name == name {
				return true
			}
		}
		return false
	}
}

func durable(evs []keel.Envelope) []keel.Envelope {
	var out []keel.Envelope
	for _, ev := range evs {
		if ev.Durable() {
			out = append(out, ev)
		}
	}
	return out
}

func types(evs []keel.Envelope) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Type
	}
	return out
}

// decode returns ev's data as E; a mismatch is a bug in the test.
func decode[E keel.Event](ev keel.Envelope) E {
	var e E
	if err := json.Unmarshal(ev.Data, &e); err != nil {
		panic(fmt.Sprintf("decode %s: %v", ev.Type, err))
	}
	return e
}

// requireSessionLog checks the session's durable log as a whole: sequences
// dense from 1, each run's events contiguous and ended by exactly one
// terminal event, and no event of a run repeated (see requireNoRepeats).
func requireSessionLog(t *testing.T, log []keel.Envelope) {
	t.Helper()
	if len(log) == 0 {
		t.Fatal("session log is empty")
	}
	ended := map[string]bool{}
	current := ""
	for i, ev := range log {
		if ev.Seq != int64(i+1) {
			t.Fatalf("session log is not dense: event %d has seq %d (%v)", i+1, ev.Seq, types(log))
		}
		if ended[ev.RunID] {
			t.Fatalf("run %s has an event (seq %d, %s) after its terminal event", ev.RunID, ev.Seq, ev.Type)
		}
		if ev.RunID != current {
			if current != "" && !ended[current] {
				t.Fatalf("run %s has no terminal event before run %s starts at seq %d", current, ev.RunID, ev.Seq)
			}
			current = ev.RunID
		}
		if ev.Terminal() {
			ended[ev.RunID] = true
		}
	}
	if !ended[current] {
		t.Fatalf("run %s has no terminal event", current)
	}
	runs := map[string][]keel.Envelope{}
	for _, ev := range log {
		runs[ev.RunID] = append(runs[ev.RunID], ev)
	}
	for _, evs := range runs {
		requireNoRepeats(t, evs)
	}
}

// requireNoRepeats checks that no durable fact of one run was recorded
// twice: one run.started, one step.started per step, one usage report and
// at most one reset per attempt, one model_call.completed per step, one
// proposal, start and finish per tool call, one terminal event.
func requireNoRepeats(t *testing.T, evs []keel.Envelope) {
	t.Helper()
	seen := map[string]int64{}
	once := func(ev keel.Envelope, key string) {
		k := ev.Type + " " + key
		if first, dup := seen[k]; dup {
			t.Fatalf("%s recorded twice: seq %d and %d", k, first, ev.Seq)
		}
		seen[k] = ev.Seq
	}
	for _, ev := range evs {
		switch ev.Type {
		case keel.TypeRunStarted, keel.TypeRunCompleted, keel.TypeRunCancelled, keel.TypeRunFailed:
			once(ev, "of the run")
		case keel.TypeStepStarted:
			once(ev, fmt.Sprint(decode[keel.StepStarted](ev).Step))
		case keel.TypeModelCallCompleted:
			once(ev, fmt.Sprint(decode[keel.ModelCallCompleted](ev).Step))
		case keel.TypeUsageUpdated:
			u := decode[keel.UsageUpdated](ev)
			once(ev, fmt.Sprint(u.Step, "/", u.Attempt))
		case keel.TypeProviderStreamReset:
			r := decode[keel.ProviderStreamReset](ev)
			once(ev, fmt.Sprint(r.Step, "/", r.Attempt))
		case keel.TypeProviderRetry:
			r := decode[keel.ProviderRequestRetry](ev)
			once(ev, fmt.Sprint(r.Step, "/", r.Attempt))
		case keel.TypeToolProposed:
			once(ev, decode[keel.ToolProposed](ev).ToolCallID)
		case keel.TypeToolStarted:
			once(ev, decode[keel.ToolStarted](ev).ToolCallID)
		case keel.TypeToolFinished:
			once(ev, decode[keel.ToolFinished](ev).ToolCallID)
		}
	}
	terminals := 0
	for _, ev := range evs {
		if ev.Terminal() {
			terminals++
		}
	}
	if terminals != 1 {
		t.Fatalf("run %s has %d terminal events, want exactly 1: %v", evs[0].RunID, terminals, types(evs))
	}
	for _, ev := range evs {
		if ev.Type == keel.TypeToolProposed {
			id := decode[keel.ToolProposed](ev).ToolCallID
			if _, ok := seen[keel.TypeToolFinished+" "+id]; !ok {
				t.Fatalf("tool call %s was proposed but never finished", id)
			}
		}
	}
}

// runEvents returns the events of one run from a session log.
func runEvents(log []keel.Envelope, runID string) []keel.Envelope {
	var out []keel.Envelope
	for _, ev := range log {
		if ev.RunID == runID {
			out = append(out, ev)
		}
	}
	return out
}

// requireSameEvents checks that a follower saw exactly the durable events
// the session committed: none skipped, none repeated, in order. A
// difference does not stop the test, so the other invariants are still
// checked.
func requireSameEvents(t *testing.T, committed, followed []keel.Envelope) {
	t.Helper()
	if diff := cmp.Diff(committed, followed); diff != "" {
		t.Errorf("the follower's durable events differ from the session's log (-committed +followed):\n%s", diff)
	}
}

// toolCallsCompleted returns the tool calls of run runID whose Tool
// activity the server has recorded as completed. The run executes in its
// session's own workflow (an inline session, one execution per run), so
// the session's executions are read from the current one back, each
// execution's first event naming the one it continued. It reads history,
// not a query, so it works while no worker is running.
func toolCallsCompleted(t *testing.T, ctx context.Context, tc sdkclient.Client, sessionID, runID string) map[string]bool {
	t.Helper()
	done := map[string]bool{}
	for execution := ""; ; {
		scheduled := map[int64]string{}
		previous := ""
		it := tc.GetWorkflowHistory(ctx, sessionID, execution, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				t.Fatalf("history of %s (execution %q): %v", sessionID, execution, err)
			}
			if a := ev.GetWorkflowExecutionStartedEventAttributes(); a != nil {
				previous = a.GetContinuedExecutionRunId()
			}
			if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == activities.ToolName {
				var in activities.ToolInput
				if err := converter.GetDefaultDataConverter().FromPayloads(a.GetInput(), &in); err != nil {
					t.Fatalf("tool activity input: %v", err)
				}
				if in.RunID == runID {
					scheduled[ev.GetEventId()] = in.Call.ID
				}
			}
			if a := ev.GetActivityTaskCompletedEventAttributes(); a != nil {
				if id, ok := scheduled[a.GetScheduledEventId()]; ok {
					done[id] = true
				}
			}
		}
		if previous == "" {
			return done
		}
		execution = previous
	}
}

// killSnapshot is what had happened when a worker process was killed: the
// tally lines written so far and the tool calls the server had recorded as
// completed. Nothing changes either while no worker runs.
type killSnapshot struct {
	gen       int
	tallied   int
	completed map[string]bool
}

// requireToolEffects checks the side effects of a run's tally calls: every
// call ran with the idempotency key "<run>/<call>"; at least one execution
// finished; no worker process ran a call twice; and no call ran again after
// the server had recorded it as completed. A call in flight when its worker
// was killed may run again on the next worker: that is Temporal's
// at-least-once delivery, and why tools get an idempotency key.
func requireToolEffects(t *testing.T, lines []tallyLine, runID string, calls []string, kills []killSnapshot) {
	t.Helper()
	for _, id := range calls {
		var starts, ends []int
		gens := map[int]bool{}
		for i, l := range lines {
			if l.RunID != runID || l.ToolCallID != id {
				continue
			}
			if want := runID + "/" + id; l.Key != want {
				t.Fatalf("tally call %s ran with idempotency key %q, want %q", id, l.Key, want)
			}
			switch l.Phase {
			case "start":
				if gens[l.Generation] {
					t.Fatalf("worker process %d ran tally call %s twice: %+v", l.Generation, id, lines)
				}
				gens[l.Generation] = true
				starts = append(starts, i)
			case "end":
				ends = append(ends, i)
			}
		}
		if len(starts) == 0 || len(ends) == 0 {
			t.Fatalf("tally call %s never finished an execution: %+v", id, lines)
		}
		for _, k := range kills {
			if !k.completed[id] {
				continue
			}
			for _, s := range starts {
				if s >= k.tallied {
					t.Fatalf("tally call %s ran again (line %d, worker %d) after the server recorded it as completed "+
						"when worker %d was killed", id, s, lines[s].Generation, k.gen)
				}
			}
		}
		if len(starts) > 1+len(kills) {
			t.Fatalf("tally call %s ran %d times with only %d kills", id, len(starts), len(kills))
		}
	}
}

// transcriptShape is what the tests compare of a transcript message.
type transcriptShape struct {
	Role    keel.Role
	Content string
	Calls   []string
	Tool    string
	Status  keel.ToolStatus
}

func shapes(msgs []keel.Message) []transcriptShape {
	out := make([]transcriptShape, len(msgs))
	for i, m := range msgs {
		s := transcriptShape{Role: m.Role, Content: m.Content, Tool: m.ToolCallID, Status: m.ToolStatus}
		for _, c := range m.ToolCalls {
			s.Calls = append(s.Calls, c.ID+":"+c.Name)
		}
		out[i] = s
	}
	return out
}

// requireTranscript checks the session's committed transcript.
func requireTranscript(t *testing.T, ctx context.Context, sess *client.Session, want []transcriptShape) {
	t.Helper()
	page, err := sess.History(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, shapes(page.Messages)); diff != "" {
		t.Fatalf("transcript (-want +got):\n%s", diff)
	}
}

// taskCompleted reads whether the workflow task an events query answer
// names (api.EventsPage.Execution and Task) completed, in the history
// there is now.
func taskCompleted(t *testing.T, ctx context.Context, tc sdkclient.Client, workflowID string, page api.EventsPage) bool {
	t.Helper()
	if page.Task == 0 {
		return false
	}
	it := tc.GetWorkflowHistory(ctx, workflowID, page.Execution, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", workflowID, err)
		}
		if ev.GetWorkflowTaskCompletedEventAttributes().GetStartedEventId() == page.Task {
			return true
		}
	}
	return false
}

// runExecution returns the run ID of the execution of an inline session
// that ran run number: the first whose state at its close (its state
// query, which a worker answers by replaying it) counts the run among
// those started. Lean executions upsert no KeelRunNumber to say it
// (api.ShapeLean). It reads the session's executions oldest first,
// waiting for each to close, and requires the run's execution to have
// continued as new once the run committed, so it is closed when this
// returns even if the run's outcome was answered just before.
func runExecution(t *testing.T, ctx context.Context, tc sdkclient.Client, sessionID string, number int) string {
	t.Helper()
	d, err := tc.DescribeWorkflowExecution(ctx, sessionID, "")
	if err != nil {
		t.Fatalf("describe %s: %v", sessionID, err)
	}
	// Back to the first execution: each one's first event names the
	// execution it continued.
	execution := d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	for {
		it := tc.GetWorkflowHistory(ctx, sessionID, execution, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		ev, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s (execution %s): %v", sessionID, execution, err)
		}
		prev := ev.GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId()
		if prev == "" {
			break
		}
		execution = prev
	}
	for {
		it := tc.GetWorkflowHistory(ctx, sessionID, execution, true, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
		closed, err := it.Next()
		if err != nil {
			t.Fatalf("close of %s (execution %s): %v", sessionID, execution, err)
		}
		next := closed.GetWorkflowExecutionContinuedAsNewEventAttributes().GetNewExecutionRunId()
		v, err := tc.QueryWorkflow(ctx, sessionID, execution, api.QueryState)
		if err != nil {
			t.Fatalf("state of %s at the close of execution %s: %v", sessionID, execution, err)
		}
		var st api.SessionStatus
		if err := v.Get(&st); err != nil {
			t.Fatal(err)
		}
		ran := st.Runs >= number
		if next == "" {
			t.Fatalf("execution %s of %s ended with %v, not a continue-as-new (it ran run %d: %v)",
				execution, sessionID, closed.GetEventType(), number, ran)
		}
		if ran {
			return execution
		}
		execution = next
	}
}
