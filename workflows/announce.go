package workflows

import "go.temporal.io/sdk/workflow"

// MemoCommittedSeq is the memo key where Session and Run workflows publish
// the last durable sequence of their log. A memo upsert is part of the
// workflow task that emitted the events, so when its history event is
// visible the events up to that sequence are committed.
//
// Readers need this because a query can be answered from state that is not
// committed: a query task that reaches a worker without the workflow in its
// cache replays the whole history, including events no workflow task has
// processed yet (a timer that fired while the previous worker was dying),
// and a signal that arrives later can make the real task decide otherwise.
// The client delivers only events at or below the published sequence.
const MemoCommittedSeq = "keel_seq"

// announce keeps MemoCommittedSeq equal to seq(), upserting the memo in
// the same workflow task as the events, on a context that cancellation
// does not reach so the announcements go on while a run winds down.
func announce(ctx workflow.Context, seq func() int64) {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	workflow.Go(dctx, func(ctx workflow.Context) {
		var announced int64
		for {
			if err := workflow.Await(ctx, func() bool { return seq() != announced }); err != nil {
				return
			}
			announced = seq()
			if err := workflow.UpsertMemo(ctx, map[string]any{MemoCommittedSeq: announced}); err != nil {
				workflow.GetLogger(ctx).Warn("memo upsert failed", "err", err)
			}
		}
	})
}
