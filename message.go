package keel

import "encoding/json"

// This file holds a session's transcript: messages and their roles, the tool
// calls a model asks for and the results that answer them, the tool specs a
// model is offered, and the provider-neutral token estimate of a request.

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
	// SteeringID is set on user messages that entered through steering;
	// InputID on those that a hook brought as boundary input
	// (BoundaryInputApplied), internal context rather than the human's.
	SteeringID string `json:"steering_id,omitempty"`
	InputID    string `json:"input_id,omitempty"`
	// CompactedTurns is set on the summary that compaction put in place of
	// earlier messages: the number of assistant turns it stands for.
	CompactedTurns int `json:"compacted_turns,omitempty"`
	// Reasoning is what the backend that wrote an assistant message needs
	// back of its reasoning in later requests, in the order it came. It is
	// never shown as the message's text, and a backend is sent only the
	// parts it wrote itself.
	Reasoning []ReasoningPart `json:"reasoning,omitempty"`
	// Attachments are the images and documents a user or tool message
	// carries, by reference (Attachment).
	Attachments []Attachment `json:"attachments,omitempty"`
}

// ReasoningPart is one piece of a model's reasoning kept in the transcript
// because its backend needs it back: an Anthropic thinking block (Text and
// Signature), a redacted one (Redacted, Signature holds its data), or an
// OpenAI reasoning item (ID, its summary as Text, its encrypted content as
// Signature).
type ReasoningPart struct {
	// Provider is the backend that wrote it ("anthropic", "openai").
	Provider string `json:"provider"`
	// ID is the backend's own ID for it, if it has one.
	ID string `json:"id,omitempty"`
	// Text is the reasoning as the backend showed it, if it did.
	Text string `json:"text,omitempty"`
	// Signature is the backend's opaque token for it, sent back as it came.
	Signature string `json:"signature,omitempty"`
	// Redacted says the backend hid the reasoning: Signature carries it.
	Redacted bool `json:"redacted,omitempty"`
}

// Reasoning asks a model to reason before it answers: by effort, or, for
// backends that count it so (Anthropic's extended thinking), by a budget
// of tokens. Each backend maps it to its own form and refuses what it
// cannot take (docs/providers.md). The zero value asks nothing: the
// backend's default.
type Reasoning struct {
	// Effort is ReasoningMinimal, ReasoningLow, ReasoningMedium or
	// ReasoningHigh. Optional.
	Effort ReasoningEffort `json:"effort,omitempty"`
	// BudgetTokens is how many tokens the model may think with, at least
	// MinReasoningBudget. Optional; a budget wins over an effort where a
	// backend takes both, and is refused where it takes only an effort.
	BudgetTokens int `json:"budget_tokens,omitempty"`
}

// ReasoningEffort is how hard a model should think.
type ReasoningEffort string

// The reasoning efforts.
const (
	ReasoningMinimal ReasoningEffort = "minimal"
	ReasoningLow     ReasoningEffort = "low"
	ReasoningMedium  ReasoningEffort = "medium"
	ReasoningHigh    ReasoningEffort = "high"
)

// Limits of Reasoning.BudgetTokens.
const (
	MinReasoningBudget = 1024
	MaxReasoningBudget = 128_000
)

// IsZero reports whether r asks nothing.
func (r Reasoning) IsZero() bool { return r == Reasoning{} }

// Validate refuses an unknown effort or a budget out of bounds, with
// CodeInvalidInput.
func (r Reasoning) Validate() error {
	switch r.Effort {
	case "", ReasoningMinimal, ReasoningLow, ReasoningMedium, ReasoningHigh:
	default:
		return Errorf(CodeInvalidInput, "reasoning.effort %q: use minimal, low, medium or high", clipName(string(r.Effort)))
	}
	if r.BudgetTokens != 0 && (r.BudgetTokens < MinReasoningBudget || r.BudgetTokens > MaxReasoningBudget) {
		return Errorf(CodeInvalidInput, "reasoning.budget_tokens %d: want %d to %d", r.BudgetTokens, MinReasoningBudget, MaxReasoningBudget)
	}
	return nil
}

func clipName(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
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

// EstimateTokens is a provider-neutral estimate of the tokens a request
// takes: about four bytes a token for text, kept reasoning and tool
// arguments, plus a few tokens of framing per message. It is for display and thresholds only;
// providers report the real count in usage.
func EstimateTokens(system string, messages []Message) int {
	n := bytesToTokens(len(system))
	for _, m := range messages {
		n += 4 + bytesToTokens(len(m.Content))
		for _, c := range m.ToolCalls {
			n += 4 + bytesToTokens(len(c.Name)+len(c.Arguments))
		}
		for _, r := range m.Reasoning {
			n += bytesToTokens(len(r.Text))
		}
		for _, a := range m.Attachments {
			n += attachmentTokens(a)
		}
	}
	return n
}

// EstimateToolTokens estimates the tokens that tool specs take in a
// request, by the same measure: their name, description and schema, plus
// a few tokens of framing each.
func EstimateToolTokens(specs []ToolSpec) int {
	n := 0
	for _, sp := range specs {
		n += 8 + bytesToTokens(len(sp.Name)+len(sp.Description)+len(sp.Parameters))
	}
	return n
}

func bytesToTokens(b int) int { return (b + 3) / 4 }

// attachmentTokens is a rough estimate of what an attachment takes: an
// image about what the backends charge a large one, a document about a
// token for every 20 bytes of PDF.
func attachmentTokens(a Attachment) int {
	if a.Kind == AttachmentImage {
		return 1600
	}
	return int(min(a.Bytes, MaxDocumentBytes) / 20)
}
