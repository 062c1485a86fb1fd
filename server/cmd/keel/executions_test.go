package main

import (
	"context"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	sdkclient "go.temporal.io/sdk/client"
)

// firstExecution returns the Temporal run ID of a session workflow's first
// execution. An inline session runs each keel run in its own workflow's
// execution and continues as new once the run commits, so a fresh
// session's run 1 is its first execution: walk the chain of executions
// back from the latest, each one's start naming the one it continued.
func firstExecution(ctx context.Context, tc sdkclient.Client, workflowID string) (string, error) {
	desc, err := tc.DescribeWorkflowExecution(ctx, workflowID, "")
	if err != nil {
		return "", err
	}
	runID := desc.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	for range 1000 {
		it := tc.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		if !it.HasNext() {
			return "", fmt.Errorf("execution %s of %s has no history", runID, workflowID)
		}
		ev, err := it.Next()
		if err != nil {
			return "", err
		}
		started := ev.GetWorkflowExecutionStartedEventAttributes()
		if started == nil {
			return "", fmt.Errorf("execution %s of %s begins with %v", runID, workflowID, ev.GetEventType())
		}
		prev := started.GetContinuedExecutionRunId()
		if prev == "" {
			return runID, nil
		}
		runID = prev
	}
	return "", fmt.Errorf("%s continued as new more than 1000 times", workflowID)
}

// waitClosed waits (a history long poll) until the execution runID of
// workflowID has closed (continued as new after its run).
func waitClosed(ctx context.Context, tc sdkclient.Client, workflowID, runID string) error {
	it := tc.GetWorkflowHistory(ctx, workflowID, runID, true, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
	_, err := it.Next()
	return err
}
