package workflows

import "go.temporal.io/sdk/workflow"

// taskWatch tells whether the session's state is what its last workflow
// task made it, so that a query answer can name that task for readers to
// check against history (api.EventsPage.Task, docs/contract.md §14.2).
//
// A worker that answers a query without the session in its cache replays
// the whole history, and the SDK applies the events after the last
// workflow task too (a timer that fired, a result that arrived) and runs
// the workflow on them, though no task has processed them yet: the state
// is then ahead of every task, and the task that does process them may
// decide otherwise (a signal can land first). That run of the workflow
// comes at the same history length as the task before it, which was
// replayed, and it is not replaying itself: in any other run the length
// is new. The watch looks at every run of the workflow's coroutines (an
// Await whose condition never holds is asked once a pass) and marks the
// state ahead when such a run changed the log.
type taskWatch struct {
	at       int
	replayed bool
	seq      int64
	ahead    bool
}

func (s *session) watchTasks(ctx workflow.Context) {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	workflow.Go(dctx, func(ctx workflow.Context) {
		_ = workflow.Await(ctx, func() bool {
			s.tasks.observe(workflow.GetInfo(ctx).GetCurrentHistoryLength(), workflow.IsReplaying(ctx), s.lastSeq())
			return false
		})
	})
}

func (w *taskWatch) observe(at int, replaying bool, seq int64) {
	switch {
	case at != w.at:
		*w = taskWatch{at: at, replayed: replaying, seq: seq}
	case replaying:
		w.replayed, w.seq = true, seq
	case w.replayed && seq != w.seq:
		w.ahead = true
	}
}

// task is the workflow task a query answer reflects: its
// WorkflowTaskStarted event, or 0 while the state is ahead of it.
func (s *session) task(ctx workflow.Context) int64 {
	if s.tasks.ahead {
		return 0
	}
	return int64(workflow.GetInfo(ctx).GetCurrentHistoryLength())
}
