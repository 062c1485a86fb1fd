// Package provider defines how keel talks to a model: a Provider streams one
// request as an iterator of Chunks, and an Assembler folds a stream into
// one normalized Response. Backends live in subpackages (scripted, openai,
// anthropic). Classify turns the failures of their HTTP requests and
// streams (HTTP statuses, cut streams, transport errors) into
// *keel.ProviderError; a backend builds one itself for what Classify
// cannot see (a request it refuses before sending, a response that is no
// stream). RetryDelay is the wait before a retry.
package provider

import (
	"context"
	"encoding/json"
	"iter"

	"github.com/keelrun/keel"
)

// Request is one model request.
type Request struct {
	// Model is the backend's model name (without the "openai:" prefix).
	Model    string
	System   string
	Messages []keel.Message
	Tools    []keel.ToolSpec
	// MaxTokens caps the response; zero lets the backend choose.
	MaxTokens int
	// Step and Attempt (both from 1) say where this request sits in the run.
	// Backends may ignore them; the scripted provider uses Attempt to inject
	// failures.
	Step    int
	Attempt int
	// Compaction marks a request that asks for a summary of the
	// conversation, to replace it (the scripted provider answers it
	// without playing a turn).
	Compaction bool
	// OutputSchema is the JSON Schema the final answer must match, when
	// the run has one (docs/contract.md §21.1). A backend asks for it the
	// way its API can (AnswerSchema, AnswerInstruction); keel validates
	// the answer whatever the backend did. Optional.
	OutputSchema json.RawMessage
}

// Chunk is one piece of a streamed response. Exactly one field is set.
type Chunk struct {
	Text      string
	Reasoning string
	ToolCall  *ToolCallDelta
	Usage     *keel.Usage
	// Generation is the generation-window output token count when the
	// backend reports one (see keel.GenerationTokens).
	Generation *keel.GenerationTokens
	// Finish is the finish reason; a stream without one is malformed.
	Finish FinishReason
	// Answer is a piece of a structured final answer that the backend
	// delivers apart from the text (Anthropic's forced answer tool): the
	// Assembler makes the whole of it the response's text.
	Answer string
}

// ToolCallDelta is a fragment of tool call Index. ID and Name usually come
// with the first fragment; Arguments are concatenated in order.
type ToolCallDelta struct {
	Index     int
	ID        string
	Name      string
	Arguments string
}

// FinishReason says why a response ended.
type FinishReason string

// The normalized finish reasons.
const (
	FinishStop          FinishReason = "stop"
	FinishToolCalls     FinishReason = "tool_calls"
	FinishLength        FinishReason = "length"
	FinishContentFilter FinishReason = "content_filter"
)

// Provider streams model responses. Stream must stop as soon as yield
// returns false and release its connection; a failure is yielded once as the
// last element, classified with Classify where it came from HTTP.
type Provider interface {
	// Name is the provider's name as used in model specs ("openai").
	Name() string
	Stream(ctx context.Context, req Request) iter.Seq2[Chunk, error]
}
