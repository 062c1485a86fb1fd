package client

import (
	"context"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
)

// state queries a session's state, and says so when its workflow is no
// longer running: a Session workflow never ends by itself (it continues as
// new), so a closed one was terminated (by an operator, or by a Temporal
// limit) or failed.
func (s *Session) state(ctx context.Context) (api.SessionStatus, error) {
	var st api.SessionStatus
	resp, err := s.c.queryWorkflowWithOptions(ctx, &client.QueryWorkflowWithOptionsRequest{
		WorkflowID: s.id, QueryType: api.QueryState,
		QueryRejectCondition: enumspb.QUERY_REJECT_CONDITION_NOT_OPEN,
	})
	if err != nil {
		return st, fromTemporal(err, "session "+s.id)
	}
	if rej := resp.QueryRejected; rej != nil {
		return s.closedState(ctx, rej.GetStatus())
	}
	return st, resp.QueryResult.Get(&st)
}

// closedState describes a session whose workflow closed with status.
func (s *Session) closedState(ctx context.Context, status enumspb.WorkflowExecutionStatus) (api.SessionStatus, error) {
	closed := s.c.closeInfo(ctx, s.id, status)
	var st api.SessionStatus
	// The state it had when it closed: a query on a closed workflow
	// replays its history. Keep what answers; the close is what matters.
	if err := s.query(ctx, s.id, api.QueryState, &st); err != nil {
		st = api.SessionStatus{}
	}
	st.SessionID, st.ActiveRun, st.Queued = s.id, nil, 0
	st.Closed = closed
	if st.Delegated != nil && status == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		// A child session ends once its one run is committed
		// (docs/contract.md §21.3): its state is that run's.
		closed.Reason = "the child session ended with its task's run"
		return st, nil
	}
	st.State = keel.StateTerminated
	if status == enumspb.WORKFLOW_EXECUTION_STATUS_FAILED {
		st.State = keel.StateFailed
	}
	return st, nil
}

// closeInfo reads why a workflow closed from its close event.
func (c *Client) closeInfo(ctx context.Context, workflowID string, status enumspb.WorkflowExecutionStatus) *api.ClosedSession {
	name := strings.TrimPrefix(status.String(), "WORKFLOW_EXECUTION_STATUS_")
	closed := &api.ClosedSession{Status: strings.ToUpper(name[:1]) + strings.ToLower(name[1:])}
	it := c.tc.GetWorkflowHistory(ctx, workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
	if !it.HasNext() {
		return closed
	}
	ev, err := it.Next()
	if err != nil {
		return closed
	}
	closed.At = ev.GetEventTime().AsTime()
	switch {
	case ev.GetWorkflowExecutionTerminatedEventAttributes() != nil:
		closed.Reason = ev.GetWorkflowExecutionTerminatedEventAttributes().GetReason()
	case ev.GetWorkflowExecutionFailedEventAttributes() != nil:
		closed.Reason = ev.GetWorkflowExecutionFailedEventAttributes().GetFailure().GetMessage()
	case ev.GetWorkflowExecutionTimedOutEventAttributes() != nil:
		closed.Reason = "the workflow reached its execution timeout"
	case ev.GetWorkflowExecutionCanceledEventAttributes() != nil:
		closed.Reason = "the workflow was cancelled through Temporal"
	case ev.GetWorkflowExecutionCompletedEventAttributes() != nil:
		closed.Reason = "the workflow was cancelled through Temporal"
	}
	return closed
}

// closedError explains why a session takes no more prompts and what to do.
func (s *Session) closedError(ctx context.Context) error {
	msg := "session " + s.id + " is closed and cannot take new prompts"
	if st, err := s.State(ctx); err == nil && st.Closed != nil {
		msg = fmt.Sprintf("session %s was %s at %s", s.id, strings.ToLower(st.Closed.Status),
			st.Closed.At.UTC().Format(time.RFC3339))
		if st.Closed.Reason != "" {
			msg += " (" + st.Closed.Reason + ")"
		}
		msg += " and cannot take new prompts; its events and transcript remain readable; continue in a new session"
	}
	return &keel.Error{Code: keel.CodeNotAccepting, Message: msg}
}
