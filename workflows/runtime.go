package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel/activities"
)

// The Runtime workflow holds keel's runtime-wide lifecycle state in
// Temporal, so every client and worker shares it: once shut down, new
// sessions and runs are refused.
const (
	RuntimeWorkflowName = "Runtime"
	// RuntimeWorkflowID is the single Runtime workflow's ID.
	RuntimeWorkflowID = "keel-runtime"
	// UpdateShutdown is the Runtime workflow's update that shuts keel down.
	UpdateShutdown = "shutdown"
)

// ShutdownResult is the answer of the shutdown update.
type ShutdownResult struct {
	// Cancelled is the number of active runs cancelled by this call: the
	// first call's count; zero for every later call.
	Cancelled int `json:"cancelled"`
	// AlreadyShutDown is set on every call after the first.
	AlreadyShutDown bool      `json:"already_shut_down,omitempty"`
	At              time.Time `json:"at"`
}

// RuntimeStatus is the answer of the Runtime workflow's state query.
type RuntimeStatus struct {
	ShutDown bool      `json:"shut_down"`
	At       time.Time `json:"at,omitempty"`
}

// RuntimeWorkflow is keel's lifecycle: it waits, and on the first shutdown
// update marks keel shut down and cancels every active run.
func RuntimeWorkflow(ctx workflow.Context) error {
	var st RuntimeStatus
	if err := workflow.SetQueryHandler(ctx, QueryState, func() (RuntimeStatus, error) { return st, nil }); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandler(ctx, UpdateShutdown, func(ctx workflow.Context) (ShutdownResult, error) {
		if st.ShutDown {
			return ShutdownResult{AlreadyShutDown: true, At: st.At}, nil
		}
		// Marked before anything blocks, so a concurrent call reports zero.
		st = RuntimeStatus{ShutDown: true, At: workflow.Now(ctx)}
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: 5 * time.Minute,
			RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 5},
			Summary:             "cancel every active run",
		})
		var res activities.ShutdownResult
		if err := workflow.ExecuteActivity(actx, activities.ShutdownName).Get(ctx, &res); err != nil {
			return ShutdownResult{At: st.At}, err
		}
		return ShutdownResult{Cancelled: res.Cancelled, At: st.At}, nil
	}); err != nil {
		return err
	}
	// Lives until someone terminates it; it only reacts to its handlers.
	return workflow.Await(ctx, func() bool { return false })
}
