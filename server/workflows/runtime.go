package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/server/activities"
)

// RuntimeWorkflow is keel's lifecycle: it waits, and on the first shutdown
// update marks keel shut down and cancels every active run.
func RuntimeWorkflow(ctx workflow.Context) error {
	var st api.RuntimeStatus
	if err := workflow.SetQueryHandler(ctx, api.QueryState, func() (api.RuntimeStatus, error) { return st, nil }); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandler(ctx, api.UpdateShutdown, func(ctx workflow.Context) (api.ShutdownResult, error) {
		if st.ShutDown {
			return api.ShutdownResult{AlreadyShutDown: true, At: st.At}, nil
		}
		// Marked before anything blocks, so a concurrent call reports zero.
		st = api.RuntimeStatus{ShutDown: true, At: workflow.Now(ctx)}
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: 5 * time.Minute,
			RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 5},
			Summary:             "cancel every active run",
		})
		var res activities.ShutdownResult
		if err := workflow.ExecuteActivity(actx, activities.ShutdownName).Get(ctx, &res); err != nil {
			return api.ShutdownResult{At: st.At}, err
		}
		return api.ShutdownResult{Cancelled: res.Cancelled, At: st.At}, nil
	}); err != nil {
		return err
	}
	// Lives until someone terminates it; it only reacts to its handlers.
	return workflow.Await(ctx, func() bool { return false })
}
