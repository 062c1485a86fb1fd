// Package hook is the worker's own work at a run's execution boundaries
// (docs/contract.md §23): lifecycle hooks that a run names and the run
// awaits, each call a durable activity, which may let the run go on, bring
// boundary input, deny or rewrite a tool call, or stop the run. The worker
// declares them (worker.Options.Hooks, keel.yaml hooks as webhooks); a run
// names those it wants (api.RunConfig.Hooks).
package hook

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/keelrun/keel"
)

// Hook is work the worker does at some of a run's execution boundaries.
type Hook interface {
	// Spec says where the hook runs and what its failure does.
	Spec() Spec
	// Call runs the hook at one boundary. It must stop when ctx is
	// cancelled (the run was). A call that failed is called again, up to
	// the retry budget, with the same Call.Key: a hook with effects
	// outside the worker makes them once per key. An error is a failure
	// of the hook (Spec.OnError says what it does to the run); a
	// *keel.Error keeps its code and retryability, any other error is
	// retryable.
	Call(ctx context.Context, c Call) (Decision, error)
}

// Spec describes a hook to the runs that name it. It travels in history
// (recorded when a run starts), so it never holds secrets.
type Spec struct {
	// Points are the boundaries where the hook runs.
	Points []keel.HookPoint `json:"points"`
	// Timeout bounds one call. Optional: DefaultTimeout; at most
	// MaxTimeout.
	Timeout keel.Duration `json:"timeout,omitempty"`
	// OnError is what the hook's failure does: OnErrorFail (the default)
	// fails the run, OnErrorContinue records it (hook.failed) and goes on.
	OnError string `json:"on_error,omitempty"`
}

// The failure policies of Spec.OnError.
const (
	OnErrorFail     = "fail"
	OnErrorContinue = "continue"
)

// Bounds of a hook.
const (
	DefaultTimeout = 10 * time.Second
	MaxTimeout     = 5 * time.Minute
	// MaxReasonBytes bounds Decision.Reason; MaxInputs the boundary
	// inputs of one decision. Input text is bounded by the run's prompt
	// limit (api.Limits.PromptBytes).
	MaxReasonBytes = 4 << 10
	MaxInputs      = 8
)

// Validate checks a spec as a worker declares it.
func (s Spec) Validate() error {
	if len(s.Points) == 0 {
		return fmt.Errorf("points: name at least one of %v", keel.HookPoints)
	}
	for i, p := range s.Points {
		if !slices.Contains(keel.HookPoints, p) {
			return fmt.Errorf("points[%d]: %q is none of %v", i, p, keel.HookPoints)
		}
	}
	if s.Timeout < 0 || s.Timeout.Std() > MaxTimeout {
		return fmt.Errorf("timeout: want up to %s, not %s", MaxTimeout, s.Timeout.Std())
	}
	switch s.OnError {
	case "", OnErrorFail, OnErrorContinue:
	default:
		return fmt.Errorf("on_error: want %s or %s, not %q", OnErrorFail, OnErrorContinue, s.OnError)
	}
	return nil
}

// At reports whether the hook runs at p.
func (s Spec) At(p keel.HookPoint) bool { return slices.Contains(s.Points, p) }

// CallTimeout is the bound of one call.
func (s Spec) CallTimeout() time.Duration {
	if s.Timeout <= 0 {
		return DefaultTimeout
	}
	return s.Timeout.Std()
}

// Call is one call of a hook: where the run is, and what is there to see.
type Call struct {
	// Hook is the name the worker offers the hook under.
	Hook  string         `json:"hook"`
	Point keel.HookPoint `json:"point"`
	// Key is the same for every attempt of this call, and differs for
	// every other call: an idempotency key.
	Key       string `json:"key"`
	SessionID string `json:"session_id"`
	RunID     string `json:"run_id"`
	// Step is the run's step: the one about to start (before_step), the
	// one whose response made the call (tool points), the last one
	// otherwise.
	Step int `json:"step"`
	// Prompt is the run's prompt (run_start).
	Prompt string `json:"prompt,omitempty"`
	// Tool is the call at before_tool and after_tool.
	Tool *keel.ToolCall `json:"tool_call,omitempty"`
	// Result is the call's result at after_tool.
	Result *ToolResult `json:"tool_result,omitempty"`
	// Text is the end-turn response about to be committed
	// (before_commit).
	Text string `json:"text,omitempty"`
	// Outcome is how the run ended (run_end).
	Outcome *Outcome `json:"outcome,omitempty"`
}

// ToolResult is a tool call's result, as the model will see it.
type ToolResult struct {
	Status keel.ToolStatus `json:"status"`
	Output string          `json:"output"`
}

// Outcome is how a run ended, as run_end sees it.
type Outcome struct {
	Status keel.RunStatus `json:"status"`
	Text   string         `json:"text,omitempty"`
	Error  *keel.Error    `json:"error,omitempty"`
}

// Decision is what a hook answers. The zero Decision lets the run go on.
type Decision struct {
	// Action is what the hook decided: "" or keel.HookContinue, or
	// keel.HookDeny and keel.HookReplace (before_tool), or keel.HookStop
	// (any point but run_end).
	Action keel.HookAction `json:"action,omitempty"`
	// Reason says why, for a deny (the model sees it) or a stop (the
	// run's error message). At most MaxReasonBytes.
	Reason string `json:"reason,omitempty"`
	// Arguments replace the tool call's (HookReplace); they must match
	// the tool's schema.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Input is boundary input (run_start, before_step, before_commit):
	// each text enters the conversation as internal context, and at
	// before_commit it makes the run take another step. At most
	// MaxInputs.
	Input []string `json:"input,omitempty"`
}

// Check refuses a decision the point does not take, or too large, with a
// *keel.Error (not retryable: the hook answered, and would answer again).
// maxInput bounds each input's bytes.
func (d Decision) Check(p keel.HookPoint, maxInput int) error {
	bad := func(format string, args ...any) error {
		return keel.Errorf(keel.CodeInvalidInput, format, args...)
	}
	switch d.Action {
	case "", keel.HookContinue:
	case keel.HookDeny:
		if p != keel.HookBeforeTool {
			return bad("deny is for before_tool, not %s", p)
		}
	case keel.HookReplace:
		if p != keel.HookBeforeTool {
			return bad("replace is for before_tool, not %s", p)
		}
		if !json.Valid(d.Arguments) {
			return bad("replace needs arguments: a JSON value")
		}
	case keel.HookStop:
		if p == keel.HookRunEnd {
			return bad("stop is for any point but run_end")
		}
	default:
		return bad("unknown action %.40q", d.Action)
	}
	if len(d.Reason) > MaxReasonBytes {
		return &keel.Error{Code: keel.CodeTooLarge, Message: fmt.Sprintf("reason: %d bytes, over the limit of %d", len(d.Reason), MaxReasonBytes)}
	}
	if len(d.Input) == 0 {
		return nil
	}
	switch p {
	case keel.HookRunStart, keel.HookBeforeStep, keel.HookBeforeCommit:
	default:
		return bad("boundary input is for run_start, before_step and before_commit, not %s", p)
	}
	if len(d.Input) > MaxInputs {
		return &keel.Error{Code: keel.CodeTooLarge, Message: fmt.Sprintf("input: %d texts, over the limit of %d", len(d.Input), MaxInputs)}
	}
	for i, in := range d.Input {
		if len(in) > maxInput {
			return &keel.Error{Code: keel.CodeTooLarge, Message: fmt.Sprintf("input[%d]: %d bytes, over the limit of %d", i, len(in), maxInput)}
		}
	}
	return nil
}

// Func makes a hook of a function: the simplest hook to write, and to
// test with.
func Func(spec Spec, f func(ctx context.Context, c Call) (Decision, error)) Hook {
	return funcHook{spec: spec, f: f}
}

type funcHook struct {
	spec Spec
	f    func(context.Context, Call) (Decision, error)
}

func (h funcHook) Spec() Spec                                         { return h.spec }
func (h funcHook) Call(ctx context.Context, c Call) (Decision, error) { return h.f(ctx, c) }
