package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/instrument"
	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/hook"
	"github.com/keelrun/keel/server/tool"
)

const (
	// interruptedOutput is the result every unresolved call gets when its
	// run ends first, so the next prompt never replays an unanswered call.
	interruptedOutput = "interrupted: the run ended before this call finished"
	approvalQuestion  = "approval"
)

var approvalSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"approved":{"type":"boolean"},"reason":{"type":"string"}},"required":["approved"]}`)

// asker puts a tool call's questions to the host (hostInput).
type asker interface {
	newBatch()
	ask(ctx workflow.Context, callID string, q tool.Question) (json.RawMessage, error)
}

// tools runs the tool calls of a run's model responses, one batch per
// response, and the detached calls (jobs) that outlive their batch
// (docs/contract.md §2.4–2.9, §8).
type tools struct {
	cfg              api.RunConfig
	sessionID, runID string
	// root is the run's context; work is cancelled when the run is.
	root, work workflow.Context
	emit       emitFunc
	lastSeq    func() int64
	host       asker
	// meter counts the usage of the run's model that calls ask for
	// (sampling).
	meter *meter
	// kids are the run's child sessions (delegate.go); stepsLeft is how
	// many steps the run has left for a child.
	kids      *delegations
	stepsLeft func() int

	// hooks run at before_tool and after_tool (hooks.go).
	hooks *hooks

	// running are the detached calls still running; finished those done
	// whose results wait for the next step boundary, in completion order.
	running, finished []*slot
}

// slot is one tool call of a batch and, once closed, its result.
type slot struct {
	call     keel.ToolCall
	step     int // the step whose response made the call
	plan     activities.CallPlan
	closed   bool
	status   keel.ToolStatus
	output   string
	atts     []keel.Attachment // the result's (activities.ToolOutput.Attachments)
	detached bool
	cancel   workflow.CancelFunc
}

func (t *tools) cancelled() bool { return t.work.Err() != nil }

// runBatch runs the tool calls of one model response and returns the
// messages they add to the transcript. All calls are proposed first, in
// model order; they then run concurrently, their events interleaving; the
// results of synchronous calls enter history in model order once every
// slot has closed. A detached call gets a placeholder result at once and
// its real result enters history when it finishes. On cancellation every
// unresolved call gets an interrupted result.
func (t *tools) runBatch(step int, res *activities.ModelTurnResult) []keel.Message {
	calls := res.Response.ToolCalls
	for _, c := range calls {
		t.emit(keel.ToolProposed{ToolCallID: c.ID, Name: c.Name, Arguments: c.Arguments, Step: step})
	}
	t.host.newBatch()
	slots := make([]*slot, len(calls))
	for i, c := range calls {
		s := &slot{call: c, step: step}
		if i < len(res.Calls) {
			s.plan = res.Calls[i]
		}
		slots[i] = s
		t.start(s)
	}
	dctx, _ := workflow.NewDisconnectedContext(t.root)
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
	msgs := make([]keel.Message, 0, len(slots))
	for _, s := range slots {
		if s.detached {
			msgs = append(msgs, keel.ToolResultMessage(s.call, keel.ToolOK,
				fmt.Sprintf("running in the background as job %s; its result will arrive in a later message", s.call.ID)))
			continue
		}
		m := keel.ToolResultMessage(s.call, s.status, s.output)
		m.Attachments = s.atts
		msgs = append(msgs, m)
	}
	return msgs
}

// start starts one call in its own workflow goroutine.
func (t *tools) start(s *slot) {
	switch {
	case !s.plan.Available:
		t.close(s, keel.ToolUnavailable, fmt.Sprintf("tool %q is not available", s.call.Name), 0)
		return
	case t.cancelled():
		t.close(s, keel.ToolInterrupted, interruptedOutput, 0)
		return
	case t.cfg.ApprovalFor(s.call.Name) == api.ApprovalDeny:
		t.close(s, keel.ToolError, fmt.Sprintf("tool %q is denied by this run's policy", s.call.Name), 0)
		return
	case s.plan.Approval == api.ApprovalDeny:
		t.close(s, keel.ToolError, fmt.Sprintf("tool %q is denied by this worker's policy", s.call.Name), 0)
		return
	}
	ctx, cancel := workflow.WithCancel(t.work)
	s.cancel = cancel
	// The worker's policy comes with the turn's result (CallPlan), so a
	// replay decides as the run did.
	needsApproval := t.cfg.ApprovalFor(s.call.Name) == api.ApprovalAsk || s.plan.Approval == api.ApprovalAsk
	// A call that hooks see first starts once they let it.
	gated := t.hooks.at(keel.HookBeforeTool)
	if !needsApproval && !gated {
		t.started(s)
	}
	workflow.Go(ctx, func(ctx workflow.Context) {
		start := workflow.Now(ctx)
		if gated {
			if status, why, ok := t.beforeTool(ctx, s); !ok {
				t.close(s, status, why, 0)
				return
			}
		}
		if needsApproval {
			if ok, why := t.approve(ctx, s); !ok {
				t.close(s, statusFor(ctx, keel.ToolError), why, 0)
				return
			}
		}
		if needsApproval || gated {
			t.started(s)
		}
		status, output := t.exec(ctx, s)
		t.afterTool(ctx, s, status, output)
		t.close(s, status, output, workflow.Now(ctx).Sub(start))
	})
}

// beforeTool runs the hooks at before_tool: they may deny the call (its
// result is the reason), run it with other arguments, or stop the run.
func (t *tools) beforeTool(ctx workflow.Context, s *slot) (keel.ToolStatus, string, bool) {
	call := s.call
	v := t.hooks.call(ctx, hook.Call{Point: keel.HookBeforeTool, SessionID: t.sessionID, RunID: t.runID, Step: s.step,
		Tool: &call}, s.call.ID)
	switch {
	case ctx.Err() != nil:
		return keel.ToolInterrupted, interruptedOutput, false
	case v.denied != "":
		return keel.ToolError, v.denied, false
	case v.replaced:
		s.call.Arguments = v.args
	}
	return "", "", true
}

// afterTool runs the hooks at after_tool with the call's result, which
// they see and cannot change; they may stop the run.
func (t *tools) afterTool(ctx workflow.Context, s *slot, status keel.ToolStatus, output string) {
	if !t.hooks.at(keel.HookAfterTool) || ctx.Err() != nil {
		return
	}
	call := s.call
	t.hooks.call(ctx, hook.Call{Point: keel.HookAfterTool, SessionID: t.sessionID, RunID: t.runID, Step: s.step,
		Tool: &call, Result: &hook.ToolResult{Status: status, Output: output}}, s.call.ID)
}

// started emits tool.started, then tool.detached for a detached call,
// which from then on runs as a job the loop does not wait for.
func (t *tools) started(s *slot) {
	t.emit(keel.ToolStarted{ToolCallID: s.call.ID, Name: s.call.Name})
	if s.plan.Traits.Detached {
		s.detached = true
		t.running = append(t.running, s)
		t.emit(keel.ToolDetached{ToolCallID: s.call.ID, Name: s.call.Name})
	}
}

// approve asks the host whether a call may run.
func (t *tools) approve(ctx workflow.Context, s *slot) (bool, string) {
	q := tool.Question{ID: approvalQuestion, Schema: approvalSchema,
		Prompt: fmt.Sprintf("Allow tool %s with arguments %s?", s.call.Name, clip(string(s.call.Arguments), 400))}
	ans, err := t.host.ask(ctx, s.call.ID, q)
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

func (t *tools) close(s *slot, status keel.ToolStatus, output string, took time.Duration) {
	s.closed, s.status, s.output = true, status, output
	t.emit(keel.ToolFinished{ToolCallID: s.call.ID, Name: s.call.Name, Status: status, Output: output,
		Duration: keel.Duration(took)})
	instrument.ToolCallDone(workflow.GetMetricsHandler(t.root), s.call.Name, string(status), took)
	if s.detached {
		t.jobDone(s)
	}
}

// exec performs a call: natively in the workflow (sleep, ask_user) or as
// Tool activities, asking the host whenever the tool needs input.
func (t *tools) exec(ctx workflow.Context, s *slot) (keel.ToolStatus, string) {
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
	case tool.NativeAgent:
		return t.delegate(ctx, s)
	case tool.NativeAskUser:
		q, err := tool.AskUserQuestion(s.call.Arguments)
		if err != nil {
			return keel.ToolError, err.Error()
		}
		ans, err := t.host.ask(ctx, s.call.ID, q)
		if err != nil {
			return statusFor(ctx, keel.ToolError), errorOutput(err)
		}
		return keel.ToolOK, tool.AnswerText(ans)
	}
	var answers map[string]json.RawMessage
	for {
		out, err := t.activity(ctx, s, answers)
		if err != nil {
			if ctx.Err() != nil {
				return keel.ToolInterrupted, interruptedOutput
			}
			return keel.ToolError, "tool failed: " + err.Error()
		}
		if out.NeedInput == nil {
			s.atts = out.Attachments
			return out.Status, out.Output
		}
		ans, err := t.host.ask(ctx, s.call.ID, *out.NeedInput)
		if err != nil {
			return statusFor(ctx, keel.ToolError), errorOutput(err)
		}
		if answers == nil {
			answers = map[string]json.RawMessage{}
		}
		answers[out.NeedInput.ID] = ans
	}
}

func (t *tools) activity(ctx workflow.Context, s *slot, answers map[string]json.RawMessage) (*activities.ToolOutput, error) {
	timeout := s.plan.Traits.Timeout.Std()
	if timeout <= 0 {
		timeout = tool.DefaultTimeout
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: timeout,
		HeartbeatTimeout:    t.cfg.HeartbeatAfter.Std(),
		// Tool failures are results, not errors; what is retried here is
		// the worker dying under a call. The idempotency key stays the same.
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2,
			MaximumInterval: 4 * time.Second, MaximumAttempts: maxRequestsPerTurn},
		Summary: "tool " + s.call.Name,
	})
	// The model is the run's: a call may ask it (an MCP server's sampling
	// request).
	in := activities.ToolInput{SessionID: t.sessionID, RunID: t.runID, Step: s.step, Call: s.call, Answers: answers,
		AfterSeq: t.lastSeq(), Model: t.cfg.Model}
	var out activities.ToolOutput
	if err := workflow.ExecuteActivity(actx, activities.ToolName, in).Get(ctx, &out); err != nil {
		return nil, err
	}
	for _, u := range out.Sampling {
		// Like compaction's, outside the model-turn budget (attempt 0);
		// the response was used, so it counts as kept.
		t.meter.request(s.step, 0, u)
		t.meter.keep(u)
	}
	return &out, nil
}

// Jobs: detached calls run while the loop goes on. Their results enter
// history at the next model-step boundary in the order they finished, as
// user messages (a tool result must follow its call, which is long past).

// jobDone moves a finished job to the boundary queue.
func (t *tools) jobDone(s *slot) {
	for i, j := range t.running {
		if j == s {
			t.running = append(t.running[:i:i], t.running[i+1:]...)
			break
		}
	}
	t.finished = append(t.finished, s)
}

// busy reports whether a detached job is still running.
func (t *tools) busy() bool { return len(t.running) > 0 }

// jobsFinished reports whether finished jobs wait for a boundary.
func (t *tools) jobsFinished() bool { return len(t.finished) > 0 }

// takeFinished returns the messages of the jobs finished since the last
// boundary, in completion order.
func (t *tools) takeFinished() []keel.Message {
	var msgs []keel.Message
	for _, j := range t.finished {
		msgs = append(msgs, jobResultMessage(j))
	}
	t.finished = nil
	return msgs
}

// stopJobs cancels the jobs still running and waits for each to record its
// interrupted result; it returns the messages of every finished job, so a
// terminal commit has them settled.
func (t *tools) stopJobs() []keel.Message {
	if len(t.running) == 0 && len(t.finished) == 0 {
		return nil
	}
	for _, j := range t.running {
		j.cancel()
	}
	dctx, _ := workflow.NewDisconnectedContext(t.root)
	_ = workflow.Await(dctx, func() bool { return len(t.running) == 0 })
	return t.takeFinished()
}

// jobIDs lists the running jobs by call ID.
func (t *tools) jobIDs() []string {
	var ids []string
	for _, j := range t.running {
		ids = append(ids, j.call.ID)
	}
	return ids
}

func jobResultMessage(s *slot) keel.Message {
	return keel.Message{Role: keel.RoleUser, ToolCallID: s.call.ID, ToolName: s.call.Name, ToolStatus: s.status,
		Content:     fmt.Sprintf("[background job %s (%s) finished: %s]\n%s", s.call.ID, s.call.Name, s.status, s.output),
		Attachments: s.atts}
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
