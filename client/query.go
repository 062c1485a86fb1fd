package client

import (
	"context"
	"errors"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
)

// queryAttempts bounds how often a query is asked again after the worker
// failed to rebuild the workflow's state for it (staleReplay).
const queryAttempts = 5

// queryWorkflow asks a query of a workflow's current execution. A query
// that the worker could not answer because it rebuilt the workflow's
// state from a history that moved on while the query was in flight is
// asked again, a few times, with a short backoff: the next query task
// carries the history it needs. A query the Temporal SDK gave up on at
// its own limit of 10 s per call (a worker that is starting, or a sticky
// worker that just stopped) is asked again until ctx's deadline; without
// a deadline the SDK's 10 s is the answer, as a worker that is down must
// not hang the caller.
func (c *Client) queryWorkflow(ctx context.Context, workflowID, name string, args ...any) (converter.EncodedValue, error) {
	resp, err := c.queryWorkflowWithOptions(ctx, &client.QueryWorkflowWithOptionsRequest{
		WorkflowID: workflowID, QueryType: name, Args: args,
	})
	if err != nil {
		return nil, err
	}
	return resp.QueryResult, nil
}

// queryRun is queryWorkflow of one execution of the workflow.
func (c *Client) queryRun(ctx context.Context, workflowID, runID, name string, args ...any) (converter.EncodedValue, error) {
	resp, err := c.queryWorkflowWithOptions(ctx, &client.QueryWorkflowWithOptionsRequest{
		WorkflowID: workflowID, RunID: runID, QueryType: name, Args: args,
	})
	if err != nil {
		return nil, err
	}
	return resp.QueryResult, nil
}

// queryWorkflowWithOptions is client.QueryWorkflowWithOptions, asked again
// as queryWorkflow says.
func (c *Client) queryWorkflowWithOptions(ctx context.Context, req *client.QueryWorkflowWithOptionsRequest) (*client.QueryWorkflowWithOptionsResponse, error) {
	wait := 25 * time.Millisecond
	for attempt := 1; ; {
		resp, err := c.tc.QueryWorkflowWithOptions(ctx, req)
		switch {
		case err != nil && askAgainAfterTimeout(ctx, err):
			// Not counted: the caller's deadline bounds these.
		case err == nil || attempt == queryAttempts || !staleReplay(err):
			return resp, err
		default:
			attempt++
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
		wait = min(2*wait, time.Second)
	}
}

// staleReplay reports whether a query failed because the Go SDK's worker
// rebuilt the workflow's state for it from a history that had moved past
// the query task (temporalio/sdk-go#755): the replay meets a command it
// has not sent yet and fails with an illegal state transition, TMPRL1100.
// The workflow is fine and its next task replays it right; only the query
// failed. Any other query failure (a handler's error, an unknown query) is
// the answer.
func staleReplay(err error) bool {
	var failed *serviceerror.QueryFailed
	return errors.As(err, &failed) && strings.Contains(failed.Error(), "[TMPRL1100]")
}

// askAgainAfterTimeout reports whether err is a call that ended at its
// own deadline (the SDK bounds each call to 10 s whatever the caller's
// context allows) while the caller's deadline is still ahead.
func askAgainAfterTimeout(ctx context.Context, err error) bool {
	if _, ok := ctx.Deadline(); !ok || ctx.Err() != nil {
		return false
	}
	var deadline *serviceerror.DeadlineExceeded
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &deadline)
}
