package keel

import "encoding/json"

// Hooks: the worker's own work at a run's execution boundaries
// (docs/contract.md §23). A hook that lets the run go on leaves no event;
// one that intervenes, fails, or brings input does.

// Wire names of the hook events.
const (
	TypeBoundaryInputApplied = "boundary_input.applied"
	TypeHookDecided          = "hook.decided"
	TypeHookFailed           = "hook.failed"
)

func init() {
	register[BoundaryInputApplied](TypeBoundaryInputApplied)
	register[HookDecided](TypeHookDecided)
	register[HookFailed](TypeHookFailed)
}

// HookPoint names an execution boundary where hooks run.
type HookPoint string

// The hook points, in the order a run meets them (docs/contract.md §23.1).
const (
	HookRunStart     HookPoint = "run_start"
	HookBeforeStep   HookPoint = "before_step"
	HookBeforeTool   HookPoint = "before_tool"
	HookAfterTool    HookPoint = "after_tool"
	HookBeforeCommit HookPoint = "before_commit"
	HookRunEnd       HookPoint = "run_end"
)

// HookPoints are the points, in that order.
var HookPoints = []HookPoint{HookRunStart, HookBeforeStep, HookBeforeTool, HookAfterTool, HookBeforeCommit, HookRunEnd}

// HookAction is what a hook decided.
type HookAction string

// The actions a hook may take. Continue leaves no event.
const (
	HookContinue HookAction = "continue"
	// HookDeny refuses a tool call (before_tool): the model sees the
	// reason as the call's error result.
	HookDeny HookAction = "deny"
	// HookReplace runs a tool call with other arguments (before_tool),
	// checked against the tool's schema.
	HookReplace HookAction = "replace"
	// HookStop ends the run with run.failed, code CodeHookStopped.
	HookStop HookAction = "stop"
)

// BoundaryInputApplied says input a hook brought (the host's background
// input: mail that arrived, a file that changed) entered the
// conversation at a step boundary, as internal context rather than human
// steering. Source is the hook's name; Point is run_start, before_step or
// before_commit.
type BoundaryInputApplied struct {
	InputID string    `json:"input_id"`
	Source  string    `json:"source"`
	Point   HookPoint `json:"point"`
	Step    int       `json:"step"`
	Text    string    `json:"text"`
}

// HookDecided says a hook intervened: it denied a tool call, replaced its
// arguments (Arguments are the ones it ran with), or stopped the run.
type HookDecided struct {
	Hook       string          `json:"hook"`
	Point      HookPoint       `json:"point"`
	Action     HookAction      `json:"action"`
	Reason     string          `json:"reason,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	Arguments  json.RawMessage `json:"arguments,omitempty"`
}

// HookFailed says a hook call failed after its retries: Code, Message and
// Retryable are its sanitized error. Continued says the run went on as if
// the hook had let it (the hook's policy); otherwise run.failed follows,
// with code CodeHookFailed.
type HookFailed struct {
	Hook       string    `json:"hook"`
	Point      HookPoint `json:"point"`
	ToolCallID string    `json:"tool_call_id,omitempty"`
	Code       Code      `json:"code"`
	Message    string    `json:"message"`
	Retryable  bool      `json:"retryable,omitempty"`
	Continued  bool      `json:"continued,omitempty"`
}

func (BoundaryInputApplied) EventType() string { return TypeBoundaryInputApplied }
func (HookDecided) EventType() string          { return TypeHookDecided }
func (HookFailed) EventType() string           { return TypeHookFailed }
