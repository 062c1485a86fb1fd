package worker

import (
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"

	"github.com/keelrun/keel/live"
)

// noticeQueue bounds the cancel notices waiting to be sent. A notice that
// does not fit is dropped: the heartbeat still brings the cancellation.
const noticeQueue = 1024

// cancelNotifier sends a cancel notice (live.CancelNotice) when workflow
// code cancels the context of an activity it started and is still waiting
// for. It watches each activity's context from a coroutine of its own,
// which issues no command, so histories are what they were without it;
// while a history replays it sends nothing. Notices leave through a queue
// and a goroutine, so workflow code never waits on the live channel.
type cancelNotifier struct {
	interceptor.WorkerInterceptorBase
	queue chan live.CancelNotice
}

func newCancelNotifier(notices live.CancelNotices, log *zap.Logger) (*cancelNotifier, func()) {
	n := &cancelNotifier{queue: make(chan live.CancelNotice, noticeQueue)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for notice := range n.queue {
			if err := notices.NotifyCancel(notice); err != nil {
				log.Debug("cancel notice not sent; heartbeats still deliver cancellation",
					zap.String("workflow_id", notice.WorkflowID), zap.Error(err))
			}
		}
	}()
	return n, func() { close(n.queue); <-done }
}

func (n *cancelNotifier) notify(notice live.CancelNotice) {
	defer func() { _ = recover() }() // the queue closed as the worker stopped
	select {
	case n.queue <- notice:
	default:
	}
}

func (n *cancelNotifier) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &noticeInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, n: n}
}

type noticeInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	n *cancelNotifier
}

func (i *noticeInbound) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	return i.Next.Init(&noticeOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: outbound}, n: i.n})
}

type noticeOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	n *cancelNotifier
}

func (o *noticeOutbound) ExecuteActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	fut := o.Next.ExecuteActivity(ctx, activityType, args...)
	if ctx.Done() == nil {
		return fut
	}
	o.Next.Go(ctx, "cancel notice", func(gctx workflow.Context) {
		cancelled := false
		sel := workflow.NewSelector(gctx)
		sel.AddFuture(fut, func(workflow.Future) {})
		sel.AddReceive(ctx.Done(), func(workflow.ReceiveChannel, bool) { cancelled = true })
		sel.Select(gctx)
		if cancelled && !fut.IsReady() && !workflow.IsReplaying(gctx) {
			info := workflow.GetInfo(gctx)
			o.n.notify(live.CancelNotice{WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID})
		}
	})
	return fut
}
