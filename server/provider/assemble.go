package provider

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/keelrun/keel"
)

// Response is one complete, normalized model response.
type Response struct {
	Text      string          `json:"text,omitempty"`
	ToolCalls []keel.ToolCall `json:"tool_calls,omitempty"`
	Finish    FinishReason    `json:"finish"`
	Usage     keel.Usage      `json:"usage"`
	// Generation is the generation-window output count; Kind "none" when the
	// backend reported no breakdown.
	Generation keel.GenerationTokens `json:"generation"`
	// Reasoning is what the backend needs back of its reasoning, in order.
	Reasoning []keel.ReasoningPart `json:"reasoning,omitempty"`
	// Hosted are the uses of hosted tools, in order.
	Hosted []keel.HostedToolActivity `json:"hosted,omitempty"`
}

// Message returns the assistant message for r.
func (r Response) Message() keel.Message {
	return keel.Message{Role: keel.RoleAssistant, Content: r.Text, ToolCalls: r.ToolCalls, Reasoning: r.Reasoning}
}

// MalformedError says a response cannot be used: a tool call whose arguments
// are not JSON, a stream that ended without a finish reason, an empty reply.
type MalformedError struct{ Reason string }

func (e *MalformedError) Error() string { return "malformed response: " + e.Reason }

// Assembler folds the chunks of one stream into a Response. The zero value
// is ready to use.
type Assembler struct {
	text      strings.Builder
	answer    strings.Builder
	reasoning strings.Builder
	calls     map[int]*partialCall
	finish    FinishReason
	usage     keel.Usage
	gen       *keel.GenerationTokens
	sawUsage  bool
	parts     []keel.ReasoningPart
	hosted    []keel.HostedToolActivity
}

type partialCall struct {
	id, name string
	args     strings.Builder
}

// Add takes one chunk.
func (a *Assembler) Add(c Chunk) {
	switch {
	case c.Text != "":
		a.text.WriteString(c.Text)
	case c.Answer != "":
		a.answer.WriteString(c.Answer)
	case c.Reasoning != "":
		a.reasoning.WriteString(c.Reasoning)
	case c.ToolCall != nil:
		if a.calls == nil {
			a.calls = map[int]*partialCall{}
		}
		p := a.calls[c.ToolCall.Index]
		if p == nil {
			p = &partialCall{}
			a.calls[c.ToolCall.Index] = p
		}
		if c.ToolCall.ID != "" {
			p.id = c.ToolCall.ID
		}
		if c.ToolCall.Name != "" {
			p.name = c.ToolCall.Name
		}
		p.args.WriteString(c.ToolCall.Arguments)
	case c.Usage != nil:
		// Some backends report usage in several chunks (input first, output
		// at the end); the later non-zero figure wins field by field.
		a.usage = mergeUsage(a.usage, *c.Usage)
		a.sawUsage = true
	case c.Generation != nil:
		g := *c.Generation
		a.gen = &g
	case c.ReasoningPart != nil:
		a.parts = append(a.parts, *c.ReasoningPart)
	case c.Hosted != nil:
		a.hosted = append(a.hosted, *c.Hosted)
	case c.Finish != "":
		a.finish = c.Finish
	}
}

// Text returns the text streamed so far, for keeping partial output when a
// stream is cut short: the structured answer once one has begun.
func (a *Assembler) Text() string {
	if a.answer.Len() > 0 {
		return a.answer.String()
	}
	return a.text.String()
}

// Usage returns the usage reported so far.
func (a *Assembler) Usage() keel.Usage {
	u := a.usage
	u.Requests = 1
	return u
}

// Response returns the complete response, or a *MalformedError.
func (a *Assembler) Response() (Response, error) {
	r := Response{Text: a.Text(), Finish: a.finish, Usage: a.Usage(), Reasoning: a.parts, Hosted: a.hosted}
	r.Generation = keel.GenerationTokens{Kind: keel.GenerationNone}
	if a.gen != nil {
		r.Generation = *a.gen
	}
	if a.finish == "" {
		return r, &MalformedError{Reason: "stream ended without a finish reason"}
	}
	idx := make([]int, 0, len(a.calls))
	for i := range a.calls {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for n, i := range idx {
		p := a.calls[i]
		if p.name == "" {
			return r, &MalformedError{Reason: fmt.Sprintf("tool call %d has no name", i)}
		}
		args := strings.TrimSpace(p.args.String())
		if args == "" {
			args = "{}"
		}
		if !json.Valid([]byte(args)) {
			return r, &MalformedError{Reason: fmt.Sprintf("tool call %s (%s) has arguments that are not JSON: %.200s", p.id, p.name, args)}
		}
		id := p.id
		if id == "" {
			id = fmt.Sprintf("call_%d", n)
		}
		r.ToolCalls = append(r.ToolCalls, keel.ToolCall{ID: id, Name: p.name, Arguments: json.RawMessage(args)})
	}
	if r.Text == "" && len(r.ToolCalls) == 0 {
		return r, &MalformedError{Reason: "empty response: no text and no tool calls"}
	}
	return r, nil
}

func mergeUsage(a, b keel.Usage) keel.Usage {
	pick := func(x, y int64) int64 {
		if y != 0 {
			return y
		}
		return x
	}
	return keel.Usage{
		InputTokens:      pick(a.InputTokens, b.InputTokens),
		OutputTokens:     pick(a.OutputTokens, b.OutputTokens),
		CacheReadTokens:  pick(a.CacheReadTokens, b.CacheReadTokens),
		CacheWriteTokens: pick(a.CacheWriteTokens, b.CacheWriteTokens),
		ReasoningTokens:  pick(a.ReasoningTokens, b.ReasoningTokens),
		WebSearches:      pick(a.WebSearches, b.WebSearches),
	}
}
