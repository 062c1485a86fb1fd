package workflows

import (
	"encoding/json"
	"errors"
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
	call     keel.ToolCall
	plan     activities.CallPlan
	closed   bool
	status   keel.ToolStatus
	output   string
	detached bool
	cancel   workflow.CancelFunc
}

const (
	// interruptedOutput is the result every unresolved call gets when its
	// run ends first, so the next prompt never replays an unanswered call.
	interruptedOutput = "interrupted: the run ended before this call finished"
	approvalQuestion  = "approval"
)

var approvalSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"approved":{"type":"boolean"},"reason":{"type":"string"}},"required":["approved"]}`)

// runTools runs the tool calls of one model response. All calls are
// proposed first, in model order; they then run concurrently, their events
// interleaving; the results of synchronous calls enter history in model
// order once every slot has closed. A detached call gets a placeholder
// result at once and its real result enters history when it finishes. On
// cancellation every unresolved call gets an interrupted result.
func (r *run) runTools(res *activities.ModelTurnResult) {
	calls := res.Response.ToolCalls
	for _, c := range calls {
		r.emit(keel.ToolProposed{ToolCallID: c.ID, Name: c.Name, Arguments: c.Arguments, Step: r.step})
	}
	r.batchIDs = map[string]bool{}
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
	// Cancellation ends every wait promptly (activities are not waited for,
	// timers and host-input waits end as cancelled), so this is bounded.
	_ = workflow.Await(dctx, func() bool {
		for _, s := range slots {
			if !s.closed && !s.detached {
				return false
			}
		}
		return true
	})
	for _, s := range slots {
		if s.detached {
			r.messages = append(r.messages, keel.ToolResultMessage(s.call, keel.ToolOK,
				fmt.Sprintf("running in the background as job %s; its result will arrive in a later message", s.call.ID)))
			continue
		}
		r.messages = append(r.messages, keel.ToolResultMessage(s.call, s.status, s.output))
	}
}

// startCall starts one call in its own workflow goroutine.
func (r *run) startCall(s *slot) {
	switch {
	case !s.plan.Available:
		r.closeSlot(s, keel.ToolUnavailable, fmt.Sprintf("tool %q is not available", s.call.Name), 0)
		return
	case r.cancelled():
		r.closeSlot(s, keel.ToolInterrupted, interruptedOutput, 0)
		return
	case r.cfg.ApprovalFor(s.call.Name) == ApprovalDeny:
		r.closeSlot(s, keel.ToolError, fmt.Sprintf("tool %q is denied by this run's policy", s.call.Name), 0)
		return
	}
	ctx, cancel := workflow.WithCancel(r.work)
	s.cancel = cancel
	needsApproval := r.cfg.ApprovalFor(s.call.Name) == ApprovalAsk
	if !needsApproval {
		r.startSlot(s)
	}
	workflow.Go(ctx, func(ctx workflow.Context) {
		start := workflow.Now(ctx)
		if needsApproval {
			if ok, why := r.approve(ctx, s); !ok {
				r.closeSlot(s, statusFor(ctx, keel.ToolError), why, 0)
				return
			}
			r.startSlot(s)
		}
		status, output := r.execCall(ctx, s)
		r.closeSlot(s, status, output, workflow.Now(ctx).Sub(start))
	})
}

// startSlot emits tool.started, then tool.detached for a detached call,
// which from then on runs as a job the loop does not wait for.
func (r *run) startSlot(s *slot) {
	r.emit(keel.ToolStarted{ToolCallID: s.call.ID, Name: s.call.Name})
	if s.plan.Traits.Detached {
		s.detached = true
		r.running = append(r.running, s)
		r.emit(keel.ToolDetached{ToolCallID: s.call.ID, Name: s.call.Name})
	}
}

// approve asks the host whether a call may run.
func (r *run) approve(ctx workflow.Context, s *slot) (bool, string) {
	q := tool.Question{ID: approvalQuestion, Schema: approvalSchema,
		Prompt: fmt.Sprintf("Allow tool %s with arguments %s?", s.call.Name, clip(string(s.call.Arguments), 400))}
	ans, err := r.ask(ctx, s.call.ID, q)
	if err != nil {
		return false, errorOutput(err)
	}
	var a struct {
		Approved bool   `json:"approved"`
		Reason   string `json:"reason"`
	}
	_ = json.Unmarshal(ans, &a)
	if !a.Approved {
		msg := fmt.Sprintf("the host denied tool %q", s.call.Name)
		if a.Reason != "" {
			msg += ": " + a.Reason
		}
		return false, msg
	}
	return true, ""
}

func (r *run) closeSlot(s *slot, status keel.ToolStatus, output string, took time.Duration) {
	s.closed, s.status, s.output = true, status, output
	r.emit(keel.ToolFinished{ToolCallID: s.call.ID, Name: s.call.Name, Status: status, Output: output,
		Duration: keel.Duration(took)})
	if s.detached {
		r.jobDone(s)
	}
}

// execCall performs a call: natively in the workflow (sleep, ask_user) or
// as Tool activities, asking the host whenever the tool needs input.
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
	case tool.NativeAskUser:
		q, err := tool.AskUserQuestion(s.call.Arguments)
		if err != nil {
			return keel.ToolError, err.Error()
		}
		ans, err := r.ask(ctx, s.call.ID, q)
		if err != nil {
			return statusFor(ctx, keel.ToolError), errorOutput(err)
		}
		return keel.ToolOK, tool.AnswerText(ans)
	}
	var answers map[string]json.RawMessage
	for {
		out, err := r.toolActivity(ctx, s, answers)
		if err != nil {
			if ctx.Err() != nil {
				return keel.ToolInterrupted, interruptedOutput
			}
			return keel.ToolError, "tool failed: " + err.Error()
		}
		if out.NeedInput == nil {
			return out.Status, out.Output
		}
		ans, err := r.ask(ctx, s.call.ID, *out.NeedInput)
		if err != nil {
			return statusFor(ctx, keel.ToolError), errorOutput(err)
		}
		if answers == nil {
			answers = map[string]json.RawMessage{}
		}
		answers[out.NeedInput.ID] = ans
	}
}

func (r *run) toolActivity(ctx workflow.Context, s *slot, answers map[string]json.RawMessage) (*activities.ToolOutput, error) {
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
	in := activities.ToolInput{SessionID: r.in.SessionID, RunID: r.in.RunID, Call: s.call, Answers: answers, AfterSeq: r.seq}
	var out activities.ToolOutput
	if err := workflow.ExecuteActivity(actx, activities.ToolName, in).Get(ctx, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// statusFor is interrupted when ctx was cancelled, otherwise status.
func statusFor(ctx workflow.Context, status keel.ToolStatus) keel.ToolStatus {
	if ctx.Err() != nil {
		return keel.ToolInterrupted
	}
	return status
}

// errorOutput is what the model reads about a failed host-input exchange.
func errorOutput(err error) string {
	if errors.Is(err, keel.ErrCancelled) {
		return interruptedOutput
	}
	return err.Error()
}
