package workflows

import (
	"go.temporal.io/sdk/workflow"
)

// committed is the value of the side-effect marker a Session execution of
// keel v0.1.0's shape (not api.ShapeLean) records in each workflow task
// that grew its log: the log's last sequence then. Readers no longer read
// it (they check the workflow task a query answer names); it is recorded
// so that those executions replay. Sinks, in an execution's first
// marker, are the worker's event sinks it delivers to.
type committed struct {
	KeelSeq   int64    `json:"keel_seq"`
	KeelSinks []string `json:"keel_sinks,omitempty"`
}

// announce records a committed marker whenever seq() moved, in the same
// workflow task as the events, on a context that cancellation does not
// reach so the announcements go on while a run winds down. closing, if
// reports that the execution ends in the task being decided: no marker
// then, since a reader takes a closed execution as committed whole and the
// next execution announces what it took over in its first task.
//
// The execution's first marker also records sinks(), the worker's event
// sinks, and hands what it recorded to started (sinks.go): a replay gets
// the names from history, and a history from before sinks none.
func announce(ctx workflow.Context, seq func() int64, closing func() bool, sinks func() []string, started func(workflow.Context, []string)) {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	workflow.Go(dctx, func(ctx workflow.Context) {
		var announced int64
		first := true
		for {
			if err := workflow.Await(ctx, func() bool {
				return seq() != announced && !closing()
			}); err != nil {
				return
			}
			announced = seq()
			c := committed{KeelSeq: announced}
			if first {
				c.KeelSinks = sinks()
			}
			enc := workflow.SideEffectWithOptions(ctx, workflow.SideEffectOptions{Summary: "committed events"},
				func(workflow.Context) any { return c })
			if first {
				first = false
				var rec committed
				_ = enc.Get(&rec)
				started(ctx, rec.KeelSinks)
			}
		}
	})
}
