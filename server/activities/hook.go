package activities

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/hook"
	"github.com/keelrun/keel/server/tool"
)

// HookName is the activity that calls one hook at one boundary.
const HookName = "Hook"

// HookInput is one hook call, and the bound of the boundary input it may
// bring (the run's prompt limit).
type HookInput struct {
	Call     hook.Call `json:"call"`
	MaxInput int       `json:"max_input"`
}

// Hook calls a hook the worker offers (docs/contract.md §23). What the
// hook answers is checked here, on the worker, so that history records
// only decisions the run can apply: the point takes the action, inputs
// and reason are within their limits, and replaced arguments match the
// tool's schema. A failure is an application error whose type is the
// keel code and whose details are the *keel.Error; one the hook marks not
// retryable, or a decision that fails its checks, is not retried.
func (a *Activities) Hook(ctx context.Context, in HookInput) (hook.Decision, error) {
	h, ok := a.Hooks[in.Call.Hook]
	if !ok {
		return hook.Decision{}, hookError(keel.Errorf(keel.CodeHookFailed, "hook %s is not offered by this worker", clipRunes(in.Call.Hook, 40)))
	}
	ctx, hb := a.begin(ctx)
	defer hb.Stop()
	cctx, cancel := context.WithTimeout(ctx, h.Spec().CallTimeout())
	defer cancel()
	d, err := callHook(cctx, h, in.Call)
	switch {
	case ctx.Err() != nil:
		// Cancelled: the run no longer waits for this answer.
		return hook.Decision{}, temporal.NewCanceledError()
	case err != nil && cctx.Err() != nil:
		return hook.Decision{}, hookError(&keel.Error{Code: keel.CodeHookFailed, Retryable: true,
			Message: fmt.Sprintf("hook %s timed out after %s", in.Call.Hook, h.Spec().CallTimeout())})
	case err != nil:
		return hook.Decision{}, hookError(err)
	}
	if err := d.Check(in.Call.Point, in.MaxInput); err != nil {
		return hook.Decision{}, hookError(err)
	}
	if d.Action == keel.HookReplace {
		if err := a.checkArguments(in.Call.Tool, d.Arguments); err != nil {
			return hook.Decision{}, hookError(err)
		}
	}
	return d, nil
}

// callHook runs h, turning a panic into a failure: a broken hook must not
// take its worker down.
func callHook(ctx context.Context, h hook.Hook, c hook.Call) (d hook.Decision, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = keel.Errorf(keel.CodeHookFailed, "hook %s panicked", c.Hook)
		}
	}()
	return h.Call(ctx, c)
}

// checkArguments refuses replaced arguments that the tool's schema does
// not take.
func (a *Activities) checkArguments(call *keel.ToolCall, args []byte) error {
	if call == nil {
		return keel.Errorf(keel.CodeInvalidInput, "replace needs a tool call")
	}
	var t tool.Tool
	if a.Tools != nil {
		t, _ = a.Tools.Lookup(call.Name)
	}
	if t == nil {
		return nil // the call will find its tool unavailable anyway
	}
	if err := tool.ValidateJSON(t.Spec().Parameters, args); err != nil {
		return keel.Errorf(keel.CodeInvalidInput, "replaced arguments of %s: %v", call.Name, err)
	}
	return nil
}

// hookError makes a hook's failure an activity error that keeps its code,
// message and retryability. An error that is not a *keel.Error is
// retryable, and its text is recorded: a Go hook whose errors may hold
// what history must not (a URL, a secret) returns a *keel.Error that
// says what may be recorded.
func hookError(err error) error {
	var ke *keel.Error
	if !errors.As(err, &ke) {
		ke = &keel.Error{Code: keel.CodeHookFailed, Message: err.Error(), Retryable: true}
	}
	msg := clipRunes(ke.Message, 1024)
	if ke.Retryable {
		return temporal.NewApplicationError(msg, string(ke.Code), ke)
	}
	return temporal.NewNonRetryableApplicationError(msg, string(ke.Code), nil, ke)
}
