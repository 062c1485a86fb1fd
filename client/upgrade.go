package client

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
)

// MoveIdleSessions asks every idle session to continue as new at once, so
// that its next execution starts on the deployment's current build: a
// session's execution is pinned to the build it started on, and an idle
// one would otherwise stay there until its next prompt has run, keeping
// an old build from draining. Sessions running a run are left alone (they
// move after it). It returns how many sessions it asked. Sessions that
// visibility does not list yet, or that start a run meanwhile, are not
// harmed: a move during a run changes nothing.
func (c *Client) MoveIdleSessions(ctx context.Context) (int, error) {
	query := fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running' AND %s NOT IN ('%s', '%s', '%s')",
		api.SessionWorkflowName, api.AttrState.GetName(),
		keel.StateRunning, keel.StateWaitingForHostInput, keel.StateCancelling)
	moved := 0
	var token []byte
	for {
		resp, err := c.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: c.namespace, Query: query, NextPageToken: token,
		})
		if err != nil {
			return moved, fmt.Errorf("keel: list idle sessions: %w", err)
		}
		for _, e := range resp.GetExecutions() {
			id := e.GetExecution().GetWorkflowId()
			err := c.tc.SignalWorkflow(ctx, id, "", api.SignalMove, nil)
			var nf *serviceerror.NotFound
			if errors.As(err, &nf) {
				continue // it closed meanwhile
			}
			if err != nil {
				return moved, fmt.Errorf("keel: move session %s: %w", id, err)
			}
			moved++
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return moved, nil
		}
	}
}
