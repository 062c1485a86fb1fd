package workflows_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/activity"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	tlog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/carry"
	"github.com/keelrun/keel/internal/ratelimit"
	"github.com/keelrun/keel/internal/schedreg"
	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/eval"
	"github.com/keelrun/keel/server/store"
	"github.com/keelrun/keel/server/worker"
)

// Replay tests guard determinism: today's workflow code must make the same
// commands, in the same order, as the code that wrote these histories, or
// every session and run in flight during a deploy would fail. The histories
// were recorded from real runs on the embedded server by the TestRecord
// tests of e2e; docs/testing.md says when and how to re-record.

// recordedHistory is one file of testdata and what it must cover, so a
// re-recording cannot silently drop a code path from the guard.
type recordedHistory struct {
	file         string
	workflowType string
	// atLeast counts events the history must hold, by event type (activity
	// scheduling by activity name instead).
	atLeast map[string]int
	// check, if set, says what else the history must show.
	check func(*historypb.History) error
}

var recordedHistories = []recordedHistory{
	// A session's executions (e2e TestRecordSessionHistories): run
	// 1 with a retried model turn and a tool; run 2 steered, with a prompt
	// queued, cancelled, then (a young execution) the queued run 3 and the
	// wait for Temporal's minimal interval; an idle execution moved by the
	// move signal.
	{file: "session_run_tools.json", workflowType: api.SessionWorkflowName, atLeast: map[string]int{
		activities.ModelTurnName:                                        3,
		activities.ToolName:                                             1,
		enumspb.EVENT_TYPE_TIMER_STARTED.String():                       1,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED.String(): 1, // send
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW.String(): 1,
	}, check: all(noChildWorkflows, lean)},
	{file: "session_run_cancelled.json", workflowType: api.SessionWorkflowName, atLeast: map[string]int{
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED.String():         1, // cancel
		enumspb.EVENT_TYPE_TIMER_CANCELED.String():                      1,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED.String(): 4, // send, queued send, steer, outcome
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW.String(): 1,
	}, check: noChildWorkflows},
	// A rate limit (e2e TestRecordRateLimitHistory; docs/contract.md
	// §20.5): started by update-with-start, three rate updates that
	// reserve, give back and settle; the refused one left no trace.
	{file: "rate_limit.json", workflowType: ratelimit.RateLimitWorkflowName, atLeast: map[string]int{
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED.String():  3,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED.String(): 3,
	}},
	// A run sent with set_default (e2e TestRecordSetDefaultHistory): the
	// run, the continue-as-new with the new defaults.
	{file: "session_set_default.json", workflowType: api.SessionWorkflowName, atLeast: map[string]int{
		activities.ModelTurnName: 1,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED.String(): 1, // send
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW.String(): 1,
	}, check: noChildWorkflows},
	// A fork and a rewind (e2e TestRecordForkHistories): a session
	// started as a fork (session.forked from its input), its run 1 and
	// the continue-as-new; the source's execution after its run 1, with
	// the rewind update back to run 0, then run 2.
	{file: "session_fork.json", workflowType: api.SessionWorkflowName, atLeast: map[string]int{
		activities.ModelTurnName: 1,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED.String(): 1, // send
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW.String(): 1,
	}, check: all(noChildWorkflows, startedAsFork)},
	{file: "session_rewind.json", workflowType: api.SessionWorkflowName, atLeast: map[string]int{
		activities.ModelTurnName: 1,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED.String(): 2, // rewind, send
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW.String(): 1,
	}, check: all(noChildWorkflows, hasUpdate(api.UpdateRewind))},
	// A run a money budget stops (e2e TestRecordMoneyHistory,
	// docs/contract.md §20): a billed malformed attempt, two priced turns,
	// the turn the budget refused before it was sent, the continue-as-new
	// carrying the cost and run.failed with its usage_total.
	{file: "session_money.json", workflowType: api.SessionWorkflowName, atLeast: map[string]int{
		activities.ModelTurnName:                                        4,
		activities.ToolName:                                             2,
		enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED.String():                2,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW.String(): 1,
	}, check: all(noChildWorkflows, pricedAndStoppedByBudget, carriedTerminalHasUsageTotal)},
	// A run that took, as signals sent without keel's codec, more
	// steering than api.MaxStagedSteers and an answer over
	// api.MaxAnswerBytes while it waited for the host (e2e
	// TestRecordSignalLimitsHistory): the 33rd steer and the answer
	// dropped, then the answer as an update and the run's end.
	{file: "session_signal_limits.json", workflowType: api.SessionWorkflowName, atLeast: map[string]int{
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED.String():         api.MaxStagedSteers + 2,
		activities.ModelTurnName:                                        2,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW.String(): 1,
	}, check: noChildWorkflows},
	// Sends under a key (e2e TestRecordOnceHistories, docs/contract.md
	// §11.7): run 1 sent under "firing-1", the key carried in the
	// continue-as-new; two executions later the same key again, answered
	// without a run, then run 3.
	{file: "session_once_sent.json", workflowType: api.SessionWorkflowName, atLeast: map[string]int{
		activities.ModelTurnName: 1,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW.String(): 1,
	}, check: all(noChildWorkflows, hasUpdate(api.UpdateSend))},
	{file: "session_once_repeated.json", workflowType: api.SessionWorkflowName, atLeast: map[string]int{
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED.String(): 2,
		activities.ModelTurnName: 1,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW.String(): 1,
	}, check: all(noChildWorkflows, oneModelTurn)},
	// A delegating session and one of its children (e2e
	// TestRecordDelegationHistory, docs/contract.md §21): a run started
	// as the planner agent (its spec's side effect), two children started
	// in one batch as Session child workflows under IDs drawn in side
	// effects, their requests reported by
	// signal, their ends, the continue-as-new; the child's run with an
	// ask_user answered through the parent, an answer that failed its
	// schema and its retry, its reports, its end with its outcome.
	{file: "session_delegation_parent.json", workflowType: api.SessionWorkflowName, atLeast: map[string]int{
		activities.ModelTurnName:                                             2,
		enumspb.EVENT_TYPE_MARKER_RECORDED.String():                          1, // the agent's spec
		enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED.String(): 2,
		enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED.String():       2,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED.String():              2, // child_requests
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW.String():      1,
	}, check: childrenAreSessions},
	{file: "session_delegation_child.json", workflowType: api.SessionWorkflowName, atLeast: map[string]int{
		activities.ModelTurnName: 3, // the question, the answer that failed its schema, its retry
		enumspb.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED.String(): 2,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED.String():          1, // respond
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED.String():                 1,
	}},
	{file: "session_idle_move.json", workflowType: api.SessionWorkflowName, atLeast: map[string]int{
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED.String():         1, // move
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW.String(): 1,
	}, check: noChildWorkflows},
	// A schedule's firings (e2e TestRecordScheduleHistories,
	// docs/contract.md §22): one that sends its prompt; one with
	// pause_on_failure that waits for its run and fails with it; the
	// check that create runs.
	{file: "scheduled_send.json", workflowType: api.ScheduledSendWorkflowName, atLeast: map[string]int{
		schedreg.SendScheduledActivity:                           1,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED.String(): 1,
	}},
	{file: "scheduled_send_wait.json", workflowType: api.ScheduledSendWorkflowName, atLeast: map[string]int{
		schedreg.SendScheduledActivity:                        1,
		schedreg.AwaitScheduledRunActivity:                    1,
		schedreg.PauseScheduleActivity:                        1,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED.String(): 1,
	}},
	{file: "scheduled_send_check.json", workflowType: api.ScheduledSendWorkflowName, atLeast: map[string]int{
		schedreg.CheckScheduleActivity:                           1,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED.String(): 1,
	}},
	// The schedule registry (docs/contract.md §22.11): the places two
	// schedules took at create, and their firings admitted.
	{file: "schedule_registry.json", workflowType: schedreg.ScheduleRegistryWorkflowName, atLeast: map[string]int{
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED.String(): 4,
	}, check: all(hasUpdate(schedreg.UpdateReserveSchedule), hasUpdate(schedreg.UpdateAdmitFiring))},
	// Evals (e2e TestRecordEvalHistories, docs/contract.md §24): a
	// dataset case with a baseline and a judge beside a recorded
	// session's two runs, completed; an eval cancelled while its first
	// case ran, whose runs it then cancels.
	{file: "eval.json", workflowType: api.EvalWorkflowName, atLeast: map[string]int{
		eval.RecordedCasesActivity:                               1,
		eval.RunCaseActivity:                                     6,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED.String(): 1,
	}},
	{file: "eval_cancelled.json", workflowType: api.EvalWorkflowName, atLeast: map[string]int{
		eval.RunCaseActivity:    1,
		eval.CancelCaseActivity: 1,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED.String(): 1,
		enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED.String():      1,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED.String():        1,
	}},
	// A run whose tool asked the run's model (e2e
	// TestRecordToolSamplingHistory): the Tool activity, two model turns,
	// the sampling request counted in the run's usage.
	{file: "session_tool_sampling.json", workflowType: api.SessionWorkflowName, atLeast: map[string]int{
		activities.ModelTurnName: 2,
		activities.ToolName:      1,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW.String(): 1,
	}, check: noChildWorkflows},
	// A run with hooks at every point (e2e TestRecordHookHistory): the
	// hooks' specs recorded as it starts, then a Hook activity at each
	// point, boundary input and replaced arguments (docs/contract.md §23).
	{file: "session_hooks.json", workflowType: api.SessionWorkflowName, atLeast: map[string]int{
		activities.HookName:                         7,
		activities.ModelTurnName:                    2,
		activities.ToolName:                         1,
		enumspb.EVENT_TYPE_MARKER_RECORDED.String(): 1,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW.String(): 1,
	}, check: noChildWorkflows},
	// A run cancelled while its model streamed (e2e
	// TestRecordCancelledStreamHistory): the turn's cancellation recorded,
	// then the turn's end, which hands back the partial text as a
	// failure.
	{file: "session_cancelled_stream.json", workflowType: api.SessionWorkflowName, atLeast: map[string]int{
		activities.ModelTurnName:                                        1,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED.String():         1, // cancel
		enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED.String():      1,
		enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED.String():                1,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW.String(): 1,
	}, check: noChildWorkflows},
	// A session delivering its events to an event sink (e2e
	// TestRecordSinkHistory, docs/contract.md §23.6): the sinks' names on
	// the model turns' results and in the carried state, DeliverEvents
	// activities beside the run's; the replayer has no sinks, so the
	// recorded names alone make the same commands.
	{file: "session_sinks.json", workflowType: api.SessionWorkflowName, atLeast: map[string]int{
		activities.DeliverEventsName:                                    2,
		activities.ModelTurnName:                                        2,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW.String(): 1,
	}, check: noChildWorkflows},
}

func TestReplayRecordedHistories(t *testing.T) {
	for _, h := range recordedHistories {
		t.Run(h.file, func(t *testing.T) {
			path := filepath.Join("testdata", h.file)
			requireCoverage(t, path, h)

			if err := replayHistory(path, storeCopy(t)); err != nil {
				t.Fatalf("replaying %s with today's workflows: %v\n"+
					"A nondeterminism error means this change would break workflows in flight: "+
					"guard it with workflow.GetVersion, or, if breaking them is intended, re-record (docs/testing.md).", path, err)
			}
		})
	}
}

// storeCopy returns a copy of the content-store objects recorded beside the
// histories: replaying encodes what today's code would write (a
// continue-as-new input, say) through the codec, and that must not add
// objects to the tree.
func storeCopy(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "store"))); err != nil {
		t.Fatal(err)
	}
	return dir
}

// replayHistory replays the history in the JSON file at path with today's
// workflows. Histories hold content-store references; the replayer reads
// them from the objects recorded beside the histories, in storeDir.
func replayHistory(path, storeDir string) error {
	st, err := store.Open(context.Background(), storeDir)
	if err != nil {
		return err
	}
	defer st.Close()
	r, err := sdkworker.NewWorkflowReplayerWithOptions(sdkworker.WorkflowReplayerOptions{
		DataConverter: store.NewDataConverter(store.NewCodec(st, store.CodecOptions{})),
	})
	if err != nil {
		return err
	}
	worker.Register(replayRegistry{r}, &activities.Activities{})
	logger := tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	return r.ReplayWorkflowHistoryFromJSONFile(logger, path)
}

// replayRegistry registers keel's workflows on a replayer through
// worker.Register, so they replay under exactly the names workers use.
// Activities do not run in a replay; their results come from history.
type replayRegistry struct{ sdkworker.WorkflowReplayer }

func (replayRegistry) RegisterActivityWithOptions(any, activity.RegisterOptions) {}

// requireCoverage checks that the history is of the expected workflow type
// and holds the events that make it worth replaying.
func requireCoverage(t *testing.T, path string, h recordedHistory) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	hist, err := sdkclient.HistoryFromJSON(f, sdkclient.HistoryJSONOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, hist.GetEvents())
	require.Equal(t, h.workflowType,
		hist.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetWorkflowType().GetName())
	counts := countEvents(hist)
	for what, n := range h.atLeast {
		require.GreaterOrEqual(t, counts[what], n, "%s: %s events", h.file, what)
	}
	if h.check != nil {
		require.NoError(t, h.check(hist), h.file)
	}
}

func countEvents(h *historypb.History) map[string]int {
	counts := map[string]int{}
	for _, ev := range h.GetEvents() {
		counts[ev.GetEventType().String()]++
		if ev.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED {
			counts[ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()]++
		}
	}
	return counts
}

// oneModelTurn checks the execution ran one model turn: a repeated send
// (docs/contract.md §11.7) started none.
func oneModelTurn(h *historypb.History) error {
	if n := countEvents(h)[activities.ModelTurnName]; n != 1 {
		return fmt.Errorf("%d model turns scheduled, want 1: a repeated send starts nothing", n)
	}
	return nil
}

// noChildWorkflows checks an execution started no workflow: its run
// executed in it.
// lean checks that an execution of api.ShapeLean recorded no marker and
// upserted no search attribute: a run bills only its start, its send, its
// activities, their heartbeats and its continue-as-new.
func lean(h *historypb.History) error {
	n := countEvents(h)
	if m, u := n[enumspb.EVENT_TYPE_MARKER_RECORDED.String()], n[enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES.String()]; m+u > 0 {
		return fmt.Errorf("%d markers and %d search-attribute upserts in a lean execution", m, u)
	}
	return nil
}

func noChildWorkflows(h *historypb.History) error {
	if n := countEvents(h)[enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED.String()]; n > 0 {
		return fmt.Errorf("%d child workflows started; a run executes in its session's execution", n)
	}
	return nil
}

// pricedAndStoppedByBudget checks that model turns' results carry their
// cost by the worker's table and that a turn failed keel.BudgetExceeded.
func pricedAndStoppedByBudget(h *historypb.History) error {
	priced, refused := 0, 0
	for _, ev := range h.GetEvents() {
		if p := ev.GetActivityTaskCompletedEventAttributes().GetResult().GetPayloads(); len(p) == 1 {
			var res activities.ModelTurnResult
			if converter.GetDefaultDataConverter().FromPayload(p[0], &res) == nil &&
				len(res.Response.Usage.Cost) == 1 && res.Response.Usage.Cost[0].Prices == "keel.yaml" {
				priced++
			}
		}
		if ev.GetActivityTaskFailedEventAttributes().GetFailure().GetApplicationFailureInfo().GetType() == string(keel.CodeBudgetExceeded) {
			refused++
		}
	}
	if priced < 2 || refused != 1 {
		return fmt.Errorf("%d priced model turns (want 2 or more), %d refused by a budget (want 1)", priced, refused)
	}
	return nil
}

// carriedTerminalHasUsageTotal checks that the run's terminal event, in
// the events the execution hands on, carries what the run spent.
func carriedTerminalHasUsageTotal(h *historypb.History) error {
	for _, ev := range h.GetEvents() {
		p := ev.GetWorkflowExecutionContinuedAsNewEventAttributes().GetInput().GetPayloads()
		if len(p) != 1 {
			continue
		}
		// The input is in the content store: read it through the codec, on
		// the objects recorded beside the histories.
		st, err := store.Open(context.Background(), filepath.Join("testdata", "store"))
		if err != nil {
			return err
		}
		defer st.Close()
		var in carry.SessionInput
		dc := store.NewDataConverter(store.NewCodec(st, store.CodecOptions{}))
		if err := dc.FromPayload(p[0], &in); err != nil || in.Carry == nil {
			return fmt.Errorf("the continue-as-new input is no session input: %v", err)
		}
		for _, env := range in.Carry.Tail {
			if !env.Terminal() {
				continue
			}
			e, err := env.Event()
			if err != nil {
				return err
			}
			if f, ok := e.(keel.RunFailed); !ok || f.UsageTotal == nil || len(f.UsageTotal.Cost) != 1 {
				return fmt.Errorf("the terminal event %+v carries no priced usage_total", e)
			}
			return nil
		}
	}
	return fmt.Errorf("no terminal event in the carried events")
}

// childrenAreSessions checks that every child workflow the history
// starts is a Session whose parent close policy is REQUEST_CANCEL, under
// an ID of the child form (docs/contract.md §21.3).
func childrenAreSessions(h *historypb.History) error {
	for _, ev := range h.GetEvents() {
		a := ev.GetStartChildWorkflowExecutionInitiatedEventAttributes()
		if a == nil {
			continue
		}
		if a.GetWorkflowType().GetName() != api.SessionWorkflowName ||
			a.GetParentClosePolicy() != enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL || !api.IsChildSessionID(a.GetWorkflowId()) {
			return fmt.Errorf("child %s: type %s, parent close policy %s", a.GetWorkflowId(),
				a.GetWorkflowType().GetName(), a.GetParentClosePolicy())
		}
	}
	return nil
}

// startedAsFork checks that the execution started from a fork's input
// (carry.SessionInput.Fork) and not from a carry.
func startedAsFork(h *historypb.History) error {
	p := h.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()
	var in carry.SessionInput
	if len(p) != 1 || converter.GetDefaultDataConverter().FromPayload(p[0], &in) != nil {
		return fmt.Errorf("the first event's input is no session input")
	}
	if in.Fork == nil || in.Carry != nil {
		return fmt.Errorf("the execution did not start as a fork")
	}
	return nil
}

// hasUpdate checks that the history accepted an update named name.
func hasUpdate(name string) func(*historypb.History) error {
	return func(h *historypb.History) error {
		for _, ev := range h.GetEvents() {
			if ev.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest().GetInput().GetName() == name {
				return nil
			}
		}
		return fmt.Errorf("no %q update accepted", name)
	}
}

// all checks every one of checks.
func all(checks ...func(*historypb.History) error) func(*historypb.History) error {
	return func(h *historypb.History) error {
		for _, check := range checks {
			if err := check(h); err != nil {
				return err
			}
		}
		return nil
	}
}
