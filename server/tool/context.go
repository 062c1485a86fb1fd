package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/keelrun/keel"
)

// CallInfo identifies the call a tool is running for.
type CallInfo struct {
	SessionID  string
	RunID      string
	ToolCallID string
	// IdempotencyKey is the same on every attempt of one call; tools with
	// side effects use it to avoid doing them twice.
	IdempotencyKey string
	Attempt        int
}

// Question is what a tool asks the host.
type Question struct {
	// ID names the question within the call; it must be unique within a
	// tool batch.
	ID     string          `json:"id"`
	Prompt string          `json:"prompt"`
	Schema json.RawMessage `json:"schema,omitempty"`
}

// NeedInput is returned (through Ask) when a tool asked a question that has
// no answer yet. The runner turns it into a host-input request; once the
// host answers, the call runs again from the start with the answer
// available, so a tool should ask its questions before its side effects.
type NeedInput struct{ Question Question }

func (e *NeedInput) Error() string {
	return fmt.Sprintf("tool needs host input %q: %s", e.Question.ID, e.Question.Prompt)
}

type callKey struct{}

type callState struct {
	info     CallInfo
	answers  map[string]json.RawMessage
	progress func(string)
}

// WithCall returns ctx carrying the call's identity, the host's answers so
// far (by question ID), and a progress reporter. Runners use it; tools read
// it through Info, Ask and Progress.
func WithCall(ctx context.Context, info CallInfo, answers map[string]json.RawMessage, progress func(string)) context.Context {
	return context.WithValue(ctx, callKey{}, &callState{info: info, answers: answers, progress: progress})
}

// Info returns the identity of the call ctx belongs to.
func Info(ctx context.Context) CallInfo {
	if s, ok := ctx.Value(callKey{}).(*callState); ok {
		return s.info
	}
	return CallInfo{}
}

// Ask returns the host's answer to q. Without an answer yet it returns a
// *NeedInput error, which the tool must return from Call unchanged.
func Ask(ctx context.Context, q Question) (json.RawMessage, error) {
	if s, ok := ctx.Value(callKey{}).(*callState); ok {
		if a, ok := s.answers[q.ID]; ok {
			return a, nil
		}
	}
	return nil, &NeedInput{Question: q}
}

// Progress reports an ephemeral progress note for the call (tool.progress).
func Progress(ctx context.Context, msg string) {
	if s, ok := ctx.Value(callKey{}).(*callState); ok && s.progress != nil {
		s.progress(msg)
	}
}

// SampleRequest asks the run's model for one response outside the
// conversation (an MCP server's sampling request).
type SampleRequest struct {
	System    string
	Messages  []keel.Message
	MaxTokens int
}

// SampleResult is the model's response to a SampleRequest.
type SampleResult struct {
	Text string
	// Model is the model that answered, as the provider names it.
	Model string
	// Finish is the provider's finish reason ("stop", "length", ...).
	Finish string
}

// ErrSamplingRefused is returned by Sample when the runner offers no model
// to the call.
var ErrSamplingRefused = errors.New("tool: sampling is not offered to this call")

type samplerKey struct{}

// WithSampler returns ctx whose tool calls may ask the run's model through
// sample (Sample). Runners set it; the Tool activity does, with the run's
// model, and counts the usage in the run's.
func WithSampler(ctx context.Context, sample func(context.Context, SampleRequest) (SampleResult, error)) context.Context {
	return context.WithValue(ctx, samplerKey{}, sample)
}

// Sample asks the run's model for one response. It returns
// ErrSamplingRefused when the runner offers no model.
func Sample(ctx context.Context, req SampleRequest) (SampleResult, error) {
	if s, ok := ctx.Value(samplerKey{}).(func(context.Context, SampleRequest) (SampleResult, error)); ok && s != nil {
		return s(ctx, req)
	}
	return SampleResult{}, ErrSamplingRefused
}
