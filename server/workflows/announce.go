package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel/api"
)

// announce records a Committed marker whenever seq() moved, in the same
// workflow task as the events, on a context that cancellation does not
// reach so the announcements go on while a run winds down. closing, if
// reports that the execution ends in the task being decided: no marker
// then, since a reader takes a closed execution as committed whole and the
// next execution announces what it took over in its first task.
func announce(ctx workflow.Context, seq func() int64, closing func() bool) {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	workflow.Go(dctx, func(ctx workflow.Context) {
		var announced int64
		for {
			if err := workflow.Await(ctx, func() bool {
				return seq() != announced && !closing()
			}); err != nil {
				return
			}
			announced = seq()
			c := api.Committed{KeelSeq: announced}
			workflow.SideEffectWithOptions(ctx, workflow.SideEffectOptions{Summary: "committed events"},
				func(workflow.Context) any { return c })
		}
	})
}
