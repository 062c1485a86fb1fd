package client

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/keelrun/keel/api"
)

// MoveIdleSessions asks every open session to continue as new once it is
// idle, so that its next execution starts on the deployment's current
// build: a session's execution is pinned to the build it started on,
// and an idle one would otherwise stay there until its next prompt has
// run, keeping an old build from draining. An idle session moves at once;
// one running a run moves after it, as it does anyway. It returns how
// many open sessions it asked, idle or not.
//
// Every open session gets the move signal: visibility cannot tell which
// are idle (a lean session upserts no KeelState, api.ShapeLean), and asking each its state first would cost a query, as
// much as the signal, for an answer that may be stale when the signal
// lands. Sessions that visibility does not list yet are missed; run it
// again.
func (c *Client) MoveIdleSessions(ctx context.Context) (int, error) {
	query := fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running'", api.SessionWorkflowName)
	moved := 0
	// A session that just continued as new may be listed twice.
	asked := map[string]bool{}
	var token []byte
	for {
		resp, err := c.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: c.namespace, Query: query, NextPageToken: token,
		})
		if err != nil {
			return moved, fmt.Errorf("keel: list open sessions: %w", err)
		}
		for _, e := range resp.GetExecutions() {
			id := e.GetExecution().GetWorkflowId()
			if asked[id] {
				continue
			}
			asked[id] = true
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
