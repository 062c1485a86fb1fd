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
	"fmt"
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
	// Reasoning asks the model to reason (keel.Reasoning); the zero value
	// asks nothing. A backend maps it to its own form, and refuses what
	// it cannot take with a ProviderError of kind invalid_request before
	// sending (CheckReasoning says so earlier, at send).
	Reasoning keel.Reasoning
}

// InputChecker is a Provider that can say, before a run starts, whether
// a model reads attachments of the given kinds (keel.Attachment). A
// provider that is not one reads none.
type InputChecker interface {
	CheckInputs(model string, kinds []keel.AttachmentKind) error
}

// CheckInputs returns nil when p's model reads attachments of kinds, and
// otherwise a *keel.Error of CodeInvalidInput saying why.
func CheckInputs(p Provider, model string, kinds []keel.AttachmentKind) error {
	if len(kinds) == 0 {
		return nil
	}
	if c, ok := p.(InputChecker); ok {
		return c.CheckInputs(model, kinds)
	}
	return keel.Errorf(keel.CodeInvalidInput, "attachments: the %s provider reads no images or documents", p.Name())
}

// KnownKind reports whether k is a kind of attachment keel has.
func KnownKind(k keel.AttachmentKind) bool {
	return k == keel.AttachmentImage || k == keel.AttachmentDocument
}

// KindNoun names attachments of kind k in a refusal ("images").
func KindNoun(k keel.AttachmentKind) string {
	switch k {
	case keel.AttachmentImage:
		return "images"
	case keel.AttachmentDocument:
		return "PDF documents"
	}
	return fmt.Sprintf("%.20q attachments", k)
}

// CheckKinds refuses a backend's configured input kinds that are not
// kinds keel has, with bad.
func CheckKinds(kinds []keel.AttachmentKind, bad error) error {
	for _, k := range kinds {
		if !KnownKind(k) {
			return fmt.Errorf("%w, not %.20q", bad, k)
		}
	}
	return nil
}

// ReasoningChecker is a Provider that can say, before a run starts,
// whether a model takes a reasoning setting. A provider that is not one
// takes none.
type ReasoningChecker interface {
	CheckReasoning(model string, r keel.Reasoning) error
}

// CheckReasoning returns nil when p's model takes r, and otherwise a
// *keel.Error of CodeInvalidInput saying why.
func CheckReasoning(p Provider, model string, r keel.Reasoning) error {
	if r.IsZero() {
		return nil
	}
	if err := r.Validate(); err != nil {
		return err
	}
	if c, ok := p.(ReasoningChecker); ok {
		return c.CheckReasoning(model, r)
	}
	return keel.Errorf(keel.CodeInvalidInput, "reasoning: the %s provider takes no reasoning setting", p.Name())
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
	// ReasoningPart is a whole piece of reasoning the backend needs back
	// in later requests, yielded once it is complete; its text, if any,
	// was streamed before as Reasoning.
	ReasoningPart *keel.ReasoningPart
	// Hosted is one use of a hosted tool, complete (Step and Attempt are
	// left to the run).
	Hosted *keel.HostedToolActivity
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
