package client

import (
	"context"
	"math"

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
	// committed is the highest sequence the workflow recorded as committed
	// (a api.Committed marker) in the history read so far; unlimited
	// once the workflow closed.
	committed int64
	// last is the ID of the last history event read.
	last int64
	// tasked is set once the execution being read completed a workflow
	// task: from then on its history holds the marker of what it took
	// over (announce records one in its first task).
	tasked bool
}

func (c *Client) watch(workflowID string) *historyWatcher {
	return &historyWatcher{c: c, workflowID: workflowID}
}

// wait blocks until the workflow's state may have changed. It reports
// whether the workflow has closed; after that it returns at once.
func (w *historyWatcher) wait(ctx context.Context) (closed bool, err error) {
	for !w.closed {
		_, changed, err := w.fetch(ctx, true)
		if err != nil {
			return false, err
		}
		if changed && !w.closed {
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
	// An execution that has not completed its first task (a session that
	// just continued as new) has not announced what it holds yet: wait
	// for that task rather than report less than was committed.
	for !w.closed && !w.tasked {
		if _, _, err := w.fetch(ctx, true); err != nil {
			return err
		}
	}
	return nil
}

// readAll reads the history there is now, without waiting for more.
func (w *historyWatcher) readAll(ctx context.Context) error {
	for {
		more, _, err := w.fetch(ctx, false)
		if err != nil || !more {
			return err
		}
	}
}

// fetch reads the next page of history, long-polling for new events if
// asked, and takes in what it says: committed-sequence markers, and
// whether the workflow closed. changed reports an event after which
// queries may answer differently (a completed workflow task, a close);
// more reports a token to continue from.
func (w *historyWatcher) fetch(ctx context.Context, longPoll bool) (more, changed bool, err error) {
	resp, err := w.c.tc.WorkflowService().GetWorkflowExecutionHistory(ctx, &workflowservice.GetWorkflowExecutionHistoryRequest{
		Namespace:              w.c.namespace,
		Execution:              &commonpb.WorkflowExecution{WorkflowId: w.workflowID, RunId: w.runID},
		NextPageToken:          w.token,
		WaitNewEvent:           longPoll,
		HistoryEventFilterType: enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT,
	})
	if err != nil {
		return false, false, fromTemporal(err, "workflow "+w.workflowID)
	}
	var next string
	for _, ev := range resp.GetHistory().GetEvents() {
		w.last = ev.GetEventId()
		seq, ok, err := w.c.committedSeq(ev.GetMarkerRecordedEventAttributes())
		if err != nil {
			return false, false, err
		}
		if ok && seq > w.committed {
			w.committed = seq
		}
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			changed, w.tasked = true, true
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT:
			changed = true
			w.closed, w.committed = true, math.MaxInt64
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
			changed = true
			next = ev.GetWorkflowExecutionContinuedAsNewEventAttributes().GetNewExecutionRunId()
		}
	}
	w.token = resp.GetNextPageToken()
	if next != "" {
		// The next execution starts its history anew; its first marker
		// announces the sequence it took over.
		w.runID, w.token, w.last, w.tasked = next, nil, 0, false
		return true, changed, nil
	}
	if longPoll && len(w.token) == 0 {
		// A long poll ends its token only when the workflow closed.
		changed = true
		w.closed, w.committed = true, math.MaxInt64
	}
	return len(w.token) > 0, changed, nil
}

// committedNow returns the sequence a workflow has committed: unlimited for
// a closed workflow, else the last Committed marker in its history.
func (c *Client) committedNow(ctx context.Context, workflowID string) (int64, error) {
	w := c.watch(workflowID)
	if err := w.readAll(ctx); err != nil {
		return 0, err
	}
	// As in catchUp: an execution's first task announces what it holds.
	for !w.closed && !w.tasked {
		if _, _, err := w.fetch(ctx, true); err != nil {
			return 0, err
		}
	}
	return w.committed, nil
}
