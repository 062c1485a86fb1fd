package client

import (
	"context"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/keelrun/keel/api"
)

// Shutdown shuts keel down for every client of the namespace: the first
// call cancels every active run, reports how many, and makes new sessions
// and runs fail with keel.ErrRuntimeShutdown; later calls report zero with
// AlreadyShutDown set. The state lives in Temporal (the Runtime workflow),
// not in this process.
func (c *Client) Shutdown(ctx context.Context) (api.ShutdownResult, error) {
	start := c.tc.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID:                       api.RuntimeWorkflowID,
		TaskQueue:                api.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		StaticSummary:            "keel runtime lifecycle",
	}, api.RuntimeWorkflowName)
	h, err := c.tc.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{
			UpdateName: api.UpdateShutdown, WaitForStage: client.WorkflowUpdateStageCompleted,
		},
	})
	var res api.ShutdownResult
	if err != nil {
		return res, fromTemporal(err, "runtime")
	}
	return res, fromTemporal(h.Get(ctx, &res), "runtime")
}
