package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/activities"
	"github.com/keelrun/keel/tool"
)

// slot is one tool call of a batch and, once closed, its result.
type slot struct {
	call   keel.ToolCall
	plan   activities.CallPlan
	closed bool
	status keel.ToolStatus
	output string
}

// interruptedOutput is the result every unresolved call gets when its run
// is cancelled, so the next prompt never replays an unanswered call.
const interruptedOutput = "interrupted: the run was cancelled before this call finished"

// runTools runs the tool calls of one model response. All calls are
// proposed first, in model order; they then run concurrently, their events
// interleaving; their results enter history in model order once every slot
// has closed. On cancellation every unresolved call gets an interrupted
// result.
func (r *run) runTools(res *activities.ModelTurnResult) {
	calls := res.Response.ToolCalls
	for _, c := range calls {
		r.emit(keel.ToolProposed{ToolCallID: c.ID, Name: c.Name, Arguments: c.Arguments, Step: r.step})
	}
	slots := make([]*slot, len(calls))
	for i, c := range calls {
		s := &slot{call: c}
		if i < len(res.Calls) {
			s.plan = res.Calls[i]
		}
		slots[i] = s
		r.startCall(s)
	}
	dctx, _ := workflow.NewDisconnectedContext(r.root)
	// Cancellation makes every call's wait end promptly (activities are not
	// waited for, timers fire as cancelled), so this wait is bounded.
	_ = workflow.Await(dctx, func() bool {
		for _, s := range slots {
			if !s.closed {
				return false
			}
		}
		return true
	})
	for _, s := range slots {
		r.messages = append(r.messages, keel.ToolResultMessage(s.call, s.status, s.output))
	}
}

// startCall starts one call in its own workflow goroutine.
func (r *run) startCall(s *slot) {
	if !s.plan.Available {
		r.closeSlot(s, keel.ToolUnavailable, fmt.Sprintf("tool %q is not available", s.call.Name), 0)
		return
	}
	if r.cancelled() {
		r.closeSlot(s, keel.ToolInterrupted, interruptedOutput, 0)
		return
	}
	r.emit(keel.ToolStarted{ToolCallID: s.call.ID, Name: s.call.Name})
	workflow.Go(r.work, func(ctx workflow.Context) {
		start := workflow.Now(ctx)
		status, output := r.execCall(ctx, s)
		r.closeSlot(s, status, output, workflow.Now(ctx).Sub(start))
	})
}

func (r *run) closeSlot(s *slot, status keel.ToolStatus, output string, took time.Duration) {
	s.closed, s.status, s.output = true, status, output
	r.emit(keel.ToolFinished{ToolCallID: s.call.ID, Name: s.call.Name, Status: status, Output: output,
		Duration: keel.Duration(took)})
}

// execCall performs a call: natively in the workflow (sleep) or as a Tool
// activity.
func (r *run) execCall(ctx workflow.Context, s *slot) (keel.ToolStatus, string) {
	switch s.plan.Traits.Native {
	case tool.NativeSleep:
		d, err := tool.SleepDuration(s.call.Arguments)
		if err != nil {
			return keel.ToolError, err.Error()
		}
		if err := workflow.NewTimer(ctx, d).Get(ctx, nil); err != nil {
			return keel.ToolInterrupted, interruptedOutput
		}
		return keel.ToolOK, fmt.Sprintf("slept %s", d)
	}
	timeout := s.plan.Traits.Timeout.Std()
	if timeout <= 0 {
		timeout = tool.DefaultTimeout
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: timeout,
		HeartbeatTimeout:    r.cfg.HeartbeatAfter.Std(),
		// Tool failures are results, not errors; what is retried here is
		// the worker dying under a call. The idempotency key stays the same.
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2,
			MaximumInterval: 4 * time.Second, MaximumAttempts: MaxRequestsPerTurn},
		Summary: "tool " + s.call.Name,
	})
	in := activities.ToolInput{SessionID: r.in.SessionID, RunID: r.in.RunID, Call: s.call, AfterSeq: r.seq}
	var out activities.ToolOutput
	if err := workflow.ExecuteActivity(actx, activities.ToolName, in).Get(ctx, &out); err != nil {
		if ctx.Err() != nil {
			return keel.ToolInterrupted, interruptedOutput
		}
		return keel.ToolError, "tool failed: " + err.Error()
	}
	return out.Status, out.Output
}
