package client

import (
	"context"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
)

// historyWatcher long-polls a workflow's history to learn when its state
// may have changed: a workflow task completed (so queries see new state) or
// the workflow closed. This is how a subscriber hears about a durable event
// only after Temporal committed it, without polling queries on a timer.
// A workflow that continues as new is followed into its next execution:
// for a session that is a hand-over, not an end.
type historyWatcher struct {
	c          *Client
	workflowID string
	// runID is the execution being read; "" until the first read, which
	// takes the current one.
	runID  string
	token  []byte
	closed bool
	// last is the ID of the last history event read.
	last int64
	// before is the execution the one being read continued from.
	before string
	// marked is the highest sequence a commit marker of keel v0.1.0's
	// shape recorded in the history read so far (committed.go).
	marked int64
	// pending is set when a read saw a change that wait has not
	// reported (a reader clears it before it asks the workflow).
	pending bool
	// handed is the hand-over the history read last showed, until a
	// reader takes it (readLog).
	handed *handOver
	// handedFrom is the execution of the last hand-over seen.
	handedFrom string
	// tasks holds, by execution, the workflow tasks whose end the history
	// read so far shows, by their WorkflowTaskStarted event: true for one
	// that completed, false for one that failed or timed out.
	tasks map[string]map[int64]bool
}

// handOver is an execution's continue-as-new: the execution it closed and
// the state it handed to the next one.
type handOver struct {
	from  string
	input *commonpb.Payloads
}

func (c *Client) watch(workflowID string) *historyWatcher {
	return &historyWatcher{c: c, workflowID: workflowID}
}

// wait blocks until the workflow's state may have changed. It reports
// whether the workflow has closed; after that it returns at once.
func (w *historyWatcher) wait(ctx context.Context) (closed bool, err error) {
	if w.pending {
		w.pending = false
		return w.closed, nil
	}
	for !w.closed {
		_, changed, err := w.fetch(ctx, true)
		if err != nil {
			return false, err
		}
		if changed && !w.closed {
			w.pending = false
			return false, nil
		}
	}
	return true, nil
}

// catchUp reads the history there is now in long-poll mode, so that wait
// goes on from its end without reading it again. The history's length,
// taken first, says where "now" ends: a long poll gives no other sign of
// having reached the end short of blocking there.
func (w *historyWatcher) catchUp(ctx context.Context) error {
	desc, err := w.c.tc.DescribeWorkflowExecution(ctx, w.workflowID, "")
	if err != nil {
		return fromTemporal(err, "workflow "+w.workflowID)
	}
	info := desc.GetWorkflowExecutionInfo()
	w.runID = info.GetExecution().GetRunId()
	length := info.GetHistoryLength()
	run := w.runID
	for !w.closed && w.runID == run && w.last < length {
		if _, _, err := w.fetch(ctx, true); err != nil {
			return err
		}
	}
	return nil
}

// fetch reads the next page of history, long-polling for new events if
// asked, and takes in what it says: committed-sequence markers, and
// whether the workflow closed. changed reports an event after which
// queries may answer differently (a completed workflow task, a close);
// more reports a token to continue from.
func (w *historyWatcher) fetch(ctx context.Context, longPoll bool) (more, changed bool, err error) {
	resp, err := w.c.historyPage(ctx, &commonpb.WorkflowExecution{WorkflowId: w.workflowID, RunId: w.runID}, w.token, longPoll)
	if err != nil {
		return false, false, fromTemporal(err, "workflow "+w.workflowID)
	}
	var next string
	for _, ev := range resp.GetHistory().GetEvents() {
		w.last = ev.GetEventId()
		if m := ev.GetMarkerRecordedEventAttributes(); m != nil {
			seq, ok, err := w.c.markedSeq(m)
			if err != nil {
				return false, false, err
			}
			if ok {
				w.marked = max(w.marked, seq)
			}
		}
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			start := ev.GetWorkflowExecutionStartedEventAttributes()
			w.before = start.GetContinuedExecutionRunId()
			if w.before != "" && w.before != w.handedFrom {
				// A watch that began after the hand-over.
				w.hand(w.before, start.GetInput())
			}
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			changed = true
			w.ended(ev.GetWorkflowTaskCompletedEventAttributes().GetStartedEventId(), true)
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
			w.ended(ev.GetWorkflowTaskFailedEventAttributes().GetStartedEventId(), false)
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
			w.ended(ev.GetWorkflowTaskTimedOutEventAttributes().GetStartedEventId(), false)
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT:
			changed = true
			w.closed = true
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
			changed = true
			can := ev.GetWorkflowExecutionContinuedAsNewEventAttributes()
			next = can.GetNewExecutionRunId()
			w.hand(w.runID, can.GetInput())
		}
	}
	w.token = resp.GetNextPageToken()
	if next != "" {
		// The next execution starts its history anew.
		w.runID, w.token, w.last = next, nil, 0
		w.pending = w.pending || changed
		return true, changed, nil
	}
	if longPoll && len(w.token) == 0 {
		// A long poll ends its token only when the workflow closed.
		changed = true
		w.closed = true
	}
	w.pending = w.pending || changed
	return len(w.token) > 0, changed, nil
}

// historyPage reads the page of exec's history events at token (nil for
// the first), long-polling for new events if asked.
func (c *Client) historyPage(ctx context.Context, exec *commonpb.WorkflowExecution, token []byte, longPoll bool) (*workflowservice.GetWorkflowExecutionHistoryResponse, error) {
	return c.tc.WorkflowService().GetWorkflowExecutionHistory(ctx, &workflowservice.GetWorkflowExecutionHistoryRequest{
		Namespace: c.namespace, Execution: exec, NextPageToken: token, WaitNewEvent: longPoll,
		HistoryEventFilterType: enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT,
	})
}

func (w *historyWatcher) hand(from string, input *commonpb.Payloads) {
	w.handed, w.handedFrom = &handOver{from: from, input: input}, from
}

// ranTask reports whether the execution being read completed a workflow
// task in the history read so far.
func (w *historyWatcher) ranTask() bool {
	for _, done := range w.tasks[w.runID] {
		if done {
			return true
		}
	}
	return false
}

// ended records how the workflow task started at event started ended.
func (w *historyWatcher) ended(started int64, completed bool) {
	if w.tasks == nil {
		w.tasks = map[string]map[int64]bool{}
	}
	if w.tasks[w.runID] == nil {
		if len(w.tasks) >= maxWatchedRuns {
			clear(w.tasks) // older executions' answers are asked again
		}
		w.tasks[w.runID] = map[int64]bool{}
	}
	w.tasks[w.runID][started] = completed
}

// speculativeWait is how long committedAt long-polls for a task's end
// before it asks whether history holds the task at all.
const speculativeWait = 100 * time.Millisecond

// maxWatchedRuns bounds the executions whose tasks a watcher remembers.
const maxWatchedRuns = 8

// committedAt reports whether a query answer computed at a workflow task
// of an execution (api.EventsPage.Execution and Task) holds committed
// state only: whether that task completed. It reads history, long-polling,
// until it knows: a task ends, completed, failed or timed out, within its
// timeout. An answer it cannot place (no task named, an execution
// behind the one being read, one that closed without it) is not
// committed; the reader asks again after the next change.
func (w *historyWatcher) committedAt(ctx context.Context, execution string, task int64) (bool, error) {
	if task <= 0 || execution == "" {
		return false, nil
	}
	if w.runID == "" {
		w.runID = execution
	}
	described := false
	for {
		if done, ok := w.tasks[execution][task]; ok {
			return done, nil
		}
		// A task's end is the event after its start: history holds
		// what arrives meanwhile back until the task ended.
		passed := execution == w.runID && w.last > task
		if _, left := w.tasks[execution]; left && execution != w.runID {
			passed = true
		}
		if passed || w.closed {
			return false, nil
		}
		// History usually holds the task's end already, and the long
		// poll answers at once; one that waits may be for a task that
		// never comes.
		wait, cancel := ctx, context.CancelFunc(func() {})
		if !described {
			wait, cancel = context.WithTimeout(ctx, speculativeWait)
		}
		before := w.last
		_, _, err := w.fetch(wait, true)
		// The server answers a long poll whose deadline is near with no
		// events rather than an error.
		waited := (err == nil && w.last == before && !w.closed) || (wait.Err() != nil && ctx.Err() == nil)
		cancel()
		if described || !waited {
			if err != nil {
				return false, err
			}
			continue
		}
		// A task that history does not hold at all was speculative: an
		// update it rejected left nothing behind, and its state is the
		// last completed task's, whose events it answered with.
		described = true
		desc, err := w.c.tc.DescribeWorkflowExecution(ctx, w.workflowID, execution)
		if err != nil {
			return false, fromTemporal(err, "workflow "+w.workflowID)
		}
		if task > desc.GetWorkflowExecutionInfo().GetHistoryLength() {
			return true, nil
		}
	}
}
