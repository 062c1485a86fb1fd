package keel

import "encoding/json"

// Role says who wrote a message.
type Role string

// The roles of a transcript.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one entry of a session's transcript.
type Message struct {
	Role    Role   `json:"role"`
	Content string `json:"content,omitempty"`
	// ToolCalls are the calls an assistant message asks for, in model order.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID and ToolName identify the call a tool message answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	ToolName   string `json:"tool_name,omitempty"`
	// ToolStatus is how the call ended (tool messages only).
	ToolStatus ToolStatus `json:"tool_status,omitempty"`
	// Aborted marks the partial output of an assistant turn that was cut
	// short by cancellation or failure. Providers see it as ordinary text.
	Aborted bool `json:"aborted,omitempty"`
	// SteeringID is set on user messages that entered through steering.
	SteeringID string `json:"steering_id,omitempty"`
	// CompactedTurns is set on the summary that compaction put in place of
	// earlier messages: the number of assistant turns it stands for.
	CompactedTurns int `json:"compacted_turns,omitempty"`
}

// ToolCall is one call a model asked for.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// ToolSpec describes a tool to a model: its name, what it does, and the JSON
// Schema of its arguments.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// ToolStatus is how a tool call ended.
type ToolStatus string

// The ways a tool call can end.
const (
	ToolOK          ToolStatus = "ok"
	ToolError       ToolStatus = "error"
	ToolUnavailable ToolStatus = "unavailable"
	ToolInterrupted ToolStatus = "interrupted"
)

// UserMessage returns a user message with the given text.
func UserMessage(text string) Message { return Message{Role: RoleUser, Content: text} }

// ToolResultMessage returns the tool message that answers call.
func ToolResultMessage(call ToolCall, status ToolStatus, output string) Message {
	return Message{Role: RoleTool, ToolCallID: call.ID, ToolName: call.Name, ToolStatus: status, Content: output}
}
