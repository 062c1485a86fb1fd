package client

import (
	"context"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
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
		if len(w.token) == 0 {
			w.closed = true
			return true, nil
		}
		for _, ev := range resp.GetHistory().GetEvents() {
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
				enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
				enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
				enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
				enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
				enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT,
				enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
				return false, nil
			}
		}
	}
	return true, nil
}
