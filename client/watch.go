package client

import (
	"context"
	"math"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	"github.com/keelrun/keel/workflows"
)

// historyWatcher long-polls a workflow's history to learn when its state
// may have changed: a workflow task completed (so queries see new state) or
// the workflow closed. This is how a subscriber hears about a durable event
// only after Temporal committed it, without polling queries on a timer.
type historyWatcher struct {
	c          *Client
	workflowID string
	token      []byte
	closed     bool
	// committed is the highest sequence the workflow published as
	// committed (workflows.MemoCommittedSeq) in the history read so far;
	// unlimited once the workflow closed.
	committed int64
}

func (c *Client) watch(workflowID string) *historyWatcher {
	return &historyWatcher{c: c, workflowID: workflowID}
}

// wait blocks until the workflow's state may have changed. It reports
// whether the workflow has closed; after that it returns at once.
func (w *historyWatcher) wait(ctx context.Context) (closed bool, err error) {
	for !w.closed {
		resp, err := w.c.tc.WorkflowService().GetWorkflowExecutionHistory(ctx, &workflowservice.GetWorkflowExecutionHistoryRequest{
			Namespace:              w.c.namespace,
			Execution:              &commonpb.WorkflowExecution{WorkflowId: w.workflowID},
			NextPageToken:          w.token,
			WaitNewEvent:           true,
			HistoryEventFilterType: enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT,
		})
		if err != nil {
			return false, fromTemporal(err, "workflow "+w.workflowID)
		}
		w.token = resp.GetNextPageToken()
		changed := false
		for _, ev := range resp.GetHistory().GetEvents() {
			if seq, ok := committedSeq(ev.GetWorkflowPropertiesModifiedEventAttributes().GetUpsertedMemo()); ok && seq > w.committed {
				w.committed = seq
			}
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
				enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
				enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
				enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
				enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
				enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT,
				enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
				changed = true
			}
		}
		if len(w.token) == 0 {
			w.closed, w.committed = true, math.MaxInt64
			return true, nil
		}
		if changed {
			return false, nil
		}
	}
	return true, nil
}

// committedSeq reads workflows.MemoCommittedSeq from a memo.
func committedSeq(memo *commonpb.Memo) (int64, bool) {
	p, ok := memo.GetFields()[workflows.MemoCommittedSeq]
	if !ok {
		return 0, false
	}
	var seq int64
	if err := converter.GetDefaultDataConverter().FromPayload(p, &seq); err != nil {
		return 0, false
	}
	return seq, true
}

// committedNow returns the sequence a workflow has committed, from its
// current memo; unlimited for a closed workflow.
func (c *Client) committedNow(ctx context.Context, workflowID string) (int64, error) {
	d, err := c.tc.DescribeWorkflowExecution(ctx, workflowID, "")
	if err != nil {
		return 0, fromTemporal(err, "workflow "+workflowID)
	}
	info := d.GetWorkflowExecutionInfo()
	if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return math.MaxInt64, nil
	}
	seq, _ := committedSeq(info.GetMemo())
	return seq, nil
}
