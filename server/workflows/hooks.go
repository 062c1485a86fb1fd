package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/hook"
)

// Hooks: the worker's own work at a run's execution boundaries
// (docs/contract.md §23). A run names hooks (api.RunConfig.Hooks); as it
// starts it records their specs, so a replay calls the hooks the run
// called whatever the worker offers by then. Each call is a Hook
// activity. A run that names none records and runs nothing: its history
// is what it was before hooks existed.

// namedHook is a hook a run named, with its spec as the run started.
type namedHook struct {
	Name string    `json:"name"`
	Spec hook.Spec `json:"spec"`
}

// hookGrace is what a Hook activity's start-to-close timeout allows
// beyond the hook's own, for the worker's work around the call.
const hookGrace = 5 * time.Second

// startHooks records the specs of the hooks a run names, from the
// worker's (Rules.Hooks), in a side effect. A hook accepted at send and
// gone by the start (a worker redeployed without it while the prompt was
// queued) fails the run.
func startHooks(ctx workflow.Context, rules Rules, names []string) ([]namedHook, *keel.Error) {
	if len(names) == 0 {
		return nil, nil
	}
	type record struct {
		Hooks   []namedHook `json:"hooks"`
		Missing string      `json:"missing,omitempty"`
	}
	// Get decodes into a value of its own, never into the one returned,
	// which shares slices with the worker's rules (as startAgent).
	enc := workflow.SideEffect(ctx, func(workflow.Context) any {
		var r record
		for _, n := range names {
			spec, ok := rules.Hooks[n]
			if !ok {
				r.Missing = n
				break
			}
			r.Hooks = append(r.Hooks, namedHook{Name: n, Spec: spec})
		}
		return r
	})
	var found record
	if err := enc.Get(&found); err != nil {
		return nil, internalError("hooks: %v", err)
	}
	if found.Missing != "" {
		return nil, keel.Errorf(keel.CodeInvalidInput, "hook %s is no longer offered by this worker", clip(found.Missing, 40))
	}
	return found.Hooks, nil
}

// hooks calls a run's hooks at its boundaries.
type hooks struct {
	named            []namedHook
	sessionID, runID string
	emit             emitFunc
	heartbeat        time.Duration
	// maxInput bounds each boundary input: the worker's prompt limit,
	// sent with each call (an activity's input, which a replay does not
	// compare, so a worker whose limits changed still replays).
	maxInput int
	// stop ends the run with err: a hook stopped it, or failed it.
	stop func(err *keel.Error)
}

// at reports whether any of the run's hooks runs at p.
func (h *hooks) at(p keel.HookPoint) bool {
	if h == nil {
		return false
	}
	for _, n := range h.named {
		if n.Spec.At(p) {
			return true
		}
	}
	return false
}

// sourcedInput is boundary input and the hook it came from.
type sourcedInput struct {
	source, text string
}

// verdict is what the hooks at one point decided together.
type verdict struct {
	inputs []sourcedInput
	// denied is the reason a tool call is denied ("" if it is not).
	denied string
	// args are a tool call's arguments, replaced if replaced is set.
	args     []byte
	replaced bool
	// stopped: a hook stopped the run, or its failure failed it; the
	// run is being ended (hooks.stop).
	stopped bool
}

// call runs the hooks at c.Point in the run's order, each awaited before
// the next, which sees a tool call as the one before left it. A deny or a
// stop ends the chain. qualifier makes the calls' keys unique within the
// run: the step, or the tool call's ID. Cancellation ends the wait at
// once; what a hook answers after that is dropped.
func (h *hooks) call(ctx workflow.Context, c hook.Call, qualifier string) verdict {
	var v verdict
	if c.Tool != nil {
		v.args = c.Tool.Arguments
	}
	for _, n := range h.named {
		if !n.Spec.At(c.Point) {
			continue
		}
		if ctx.Err() != nil {
			return v
		}
		c.Hook = n.Name
		c.Key = fmt.Sprintf("%s/%s/%s/%s", c.RunID, c.Point, qualifier, n.Name)
		if c.Tool != nil {
			t := *c.Tool
			t.Arguments = v.args
			c.Tool = &t
		}
		d, err := h.activity(ctx, n, c)
		if err != nil {
			if ctx.Err() != nil {
				return v
			}
			if h.failed(n, c, err) {
				v.stopped = true
				return v
			}
			continue
		}
		for _, in := range d.Input {
			v.inputs = append(v.inputs, sourcedInput{source: n.Name, text: in})
		}
		toolID := ""
		if c.Tool != nil {
			toolID = c.Tool.ID
		}
		decided := keel.HookDecided{Hook: n.Name, Point: c.Point, Action: d.Action, Reason: d.Reason, ToolCallID: toolID}
		switch d.Action {
		case keel.HookDeny:
			h.emit(decided)
			v.denied = fmt.Sprintf("the call was denied by hook %s", n.Name)
			if d.Reason != "" {
				v.denied += ": " + d.Reason
			}
			return v
		case keel.HookReplace:
			decided.Arguments = d.Arguments
			h.emit(decided)
			v.args, v.replaced = d.Arguments, true
		case keel.HookStop:
			h.emit(decided)
			msg := fmt.Sprintf("stopped by hook %s at %s", n.Name, c.Point)
			if d.Reason != "" {
				msg += ": " + d.Reason
			}
			h.stop(&keel.Error{Code: keel.CodeHookStopped, Message: msg})
			v.stopped = true
			return v
		}
	}
	return v
}

func (h *hooks) activity(ctx workflow.Context, n namedHook, c hook.Call) (hook.Decision, error) {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: n.Spec.CallTimeout() + hookGrace,
		HeartbeatTimeout:    h.heartbeat,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2,
			MaximumInterval: 4 * time.Second, MaximumAttempts: maxRequestsPerTurn},
		Summary: fmt.Sprintf("hook %s at %s", n.Name, c.Point),
	})
	var d hook.Decision
	err := workflow.ExecuteActivity(actx, activities.HookName, activities.HookInput{Call: c, MaxInput: h.maxInput}).Get(ctx, &d)
	return d, err
}

// failed records a hook's failure (hook.failed) and, under the hook's
// policy, fails the run; it reports whether it did. A failure at run_end
// never changes how the run ended.
func (h *hooks) failed(n namedHook, c hook.Call, err error) bool {
	ke := hookFailure(n.Name, err)
	cont := n.Spec.OnError == hook.OnErrorContinue || c.Point == keel.HookRunEnd
	ev := keel.HookFailed{Hook: n.Name, Point: c.Point, Code: ke.Code, Message: ke.Message, Retryable: ke.Retryable,
		Continued: cont}
	if c.Tool != nil {
		ev.ToolCallID = c.Tool.ID
	}
	h.emit(ev)
	if cont {
		return false
	}
	h.stop(&keel.Error{Code: keel.CodeHookFailed, Retryable: ke.Retryable,
		Message: fmt.Sprintf("hook %s failed at %s: %s", n.Name, c.Point, ke.Message)})
	return true
}

// hookFailure is the sanitized error of a Hook activity that failed after
// its retries: the *keel.Error the activity gave, or what Temporal says
// of an activity that never answered.
func hookFailure(name string, err error) *keel.Error {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		ke := &keel.Error{}
		if appErr.HasDetails() && appErr.Details(ke) == nil && ke.Code != "" {
			return ke
		}
		return &keel.Error{Code: keel.CodeHookFailed, Message: clip(appErr.Message(), 1024), Retryable: !appErr.NonRetryable()}
	}
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) {
		return &keel.Error{Code: keel.CodeHookFailed, Retryable: true,
			Message: fmt.Sprintf("hook %s did not answer in time (%s)", name, timeout.TimeoutType())}
	}
	var panicErr *temporal.PanicError
	if errors.As(err, &panicErr) {
		return &keel.Error{Code: keel.CodeHookFailed, Message: fmt.Sprintf("hook %s panicked", name)}
	}
	return &keel.Error{Code: keel.CodeHookFailed, Retryable: true, Message: fmt.Sprintf("hook %s failed on the worker", name)}
}
