// Package scripted is a provider that plays a JSON script instead of calling
// a model: text chunks, reasoning, tool calls, usage, and injected failures
// (retryable with Retry-After, permanent, malformed, stream cuts, hangs).
// It drives keel's tests and the offline demo, and serves users' own tests.
//
// The turn it plays is the number of completed assistant messages in the
// request, so a script covers a whole session; the request's Attempt picks
// the injected failure, if any.
//
//	s, _ := scripted.Parse([]byte(`{"turns":[{"text":["Hello", " world"]}]}`))
//	p := scripted.New(s)
//	for chunk, err := range p.Stream(ctx, provider.Request{Attempt: 1}) { ... }
package scripted

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/provider"
)

// Provider plays a script.
type Provider struct {
	script *Script
}

var _ provider.Provider = (*Provider)(nil)

// New returns a provider playing s.
func New(s *Script) *Provider { return &Provider{script: s} }

// Name returns "scripted".
func (p *Provider) Name() string { return "scripted" }

// TurnIndex returns the index of the turn a request plays: the number of its
// completed assistant messages, counting those a compaction summary stands
// for.
func TurnIndex(req provider.Request) int {
	n := 0
	for _, m := range req.Messages {
		n += m.CompactedTurns
		if m.Role == keel.RoleAssistant && !m.Aborted {
			n++
		}
	}
	return n
}

// summarize answers a compaction request without playing a turn.
func summarize(req provider.Request, yield func(provider.Chunk, error) bool) {
	text := fmt.Sprintf("Summary of %d earlier messages (%d turns).", len(req.Messages), TurnIndex(req))
	for _, c := range []provider.Chunk{{Text: text}, {Usage: &keel.Usage{InputTokens: int64(len(req.Messages)), OutputTokens: 10}},
		{Finish: provider.FinishStop}} {
		if !yield(c, nil) {
			return
		}
	}
}

// Stream plays the turn for req.
func (p *Provider) Stream(ctx context.Context, req provider.Request) iter.Seq2[provider.Chunk, error] {
	return func(yield func(provider.Chunk, error) bool) {
		if req.Compaction {
			summarize(req, yield)
			return
		}
		i := TurnIndex(req)
		if p.script.Repeat {
			i %= len(p.script.Turns)
		}
		if i >= len(p.script.Turns) {
			yield(provider.Chunk{}, &keel.ProviderError{
				Provider: "scripted", Kind: keel.ProviderInvalidRequest,
				Message: fmt.Sprintf("script has %d turns; turn %d was requested", len(p.script.Turns), i+1),
			})
			return
		}
		turn := p.script.Turns[i]
		delay := p.script.ChunkDelay
		if turn.ChunkDelay != nil {
			delay = *turn.ChunkDelay
		}
		var fail *Failure
		if a := req.Attempt - 1; a >= 0 && a < len(turn.Failures) {
			fail = &turn.Failures[a]
		}
		chunks := turnChunks(turn, fail, !req.Reasoning.IsZero())
		if fail != nil && !isFault(fail.Kind) {
			// A provider error answers before any chunk, as HTTP errors do.
			yield(provider.Chunk{}, failureError(fail))
			return
		}
		for n, c := range chunks {
			if fail != nil && n == fail.AfterChunks {
				switch fail.Kind {
				case FaultStreamCut:
					yield(provider.Chunk{}, &keel.ProviderError{Provider: "scripted", Kind: keel.ProviderStreamCut,
						Retryable: true, Message: "connection closed mid-stream"})
					return
				case FaultHang:
					<-ctx.Done()
					yield(provider.Chunk{}, ctx.Err())
					return
				}
			}
			if delay > 0 {
				t := time.NewTimer(delay.Std())
				select {
				case <-ctx.Done():
					t.Stop()
					yield(provider.Chunk{}, ctx.Err())
					return
				case <-t.C:
				}
			} else if err := ctx.Err(); err != nil {
				yield(provider.Chunk{}, err)
				return
			}
			if !yield(c, nil) {
				return
			}
		}
		if fail != nil && (fail.Kind == FaultHang || fail.Kind == FaultStreamCut) {
			// AfterChunks at or past the end: strike after the last chunk.
			if fail.Kind == FaultHang {
				<-ctx.Done()
				yield(provider.Chunk{}, ctx.Err())
				return
			}
			yield(provider.Chunk{}, &keel.ProviderError{Provider: "scripted", Kind: keel.ProviderStreamCut,
				Retryable: true, Message: "connection closed mid-stream"})
		}
	}
}

func isFault(kind string) bool {
	switch kind {
	case FaultMalformed, FaultEmpty, FaultNoFinish, FaultStreamCut, FaultHang, FaultText:
		return true
	}
	return false
}

func failureError(f *Failure) *keel.ProviderError {
	kind := keel.ProviderErrorKind(f.Kind)
	msg := f.Message
	if msg == "" {
		msg = "injected " + f.Kind
	}
	return &keel.ProviderError{
		Provider: "scripted", Kind: kind, Status: f.Status,
		RetryAfter: f.RetryAfter, Retryable: kind.Retryable(), Message: msg,
	}
}

// turnChunks lays a turn out as the chunks a backend would stream, shaped by
// a stream fault if there is one.
func turnChunks(t Turn, f *Failure, keepReasoning bool) []provider.Chunk {
	var out []provider.Chunk
	if f != nil && f.Kind == FaultEmpty {
		out = append(out, provider.Chunk{Usage: usageOf(f.Usage, t.Usage)}, provider.Chunk{Finish: provider.FinishStop})
		return out
	}
	if f != nil && f.Kind == FaultText {
		// Another answer, complete and well formed: the turn's own text
		// and calls are left out.
		t = Turn{Text: f.Text, Usage: usageOf(f.Usage, t.Usage)}
		f = nil
	}
	for _, r := range t.Reasoning {
		out = append(out, provider.Chunk{Reasoning: r})
	}
	if keepReasoning && len(t.Reasoning) > 0 {
		out = append(out, provider.Chunk{ReasoningPart: &keel.ReasoningPart{Provider: "scripted", Text: strings.Join(t.Reasoning, "")}})
	}
	for i := range t.Hosted {
		h := t.Hosted[i]
		out = append(out, provider.Chunk{Hosted: &h})
	}
	for _, s := range t.Text {
		out = append(out, provider.Chunk{Text: s})
	}
	for i, c := range t.ToolCalls {
		args := string(c.Arguments)
		if args == "" {
			args = "{}"
		}
		if f != nil && f.Kind == FaultMalformed {
			args = args[:len(args)/2] + `,,"`
		}
		// Split arguments in two fragments, as streaming backends do.
		half := len(args) / 2
		out = append(out,
			provider.Chunk{ToolCall: &provider.ToolCallDelta{Index: i, ID: c.ID, Name: c.Name, Arguments: args[:half]}},
			provider.Chunk{ToolCall: &provider.ToolCallDelta{Index: i, Arguments: args[half:]}})
	}
	if f != nil && f.Kind == FaultMalformed && len(t.ToolCalls) == 0 {
		out = append(out, provider.Chunk{ToolCall: &provider.ToolCallDelta{Index: 0, ID: "call_bad", Name: "broken", Arguments: `{"unterminated": `}})
	}
	var u *keel.Usage
	if f != nil {
		u = usageOf(f.Usage, t.Usage)
	} else {
		u = usageOf(t.Usage, nil)
	}
	out = append(out, provider.Chunk{Usage: u})
	if t.Generation != nil {
		g := *t.Generation
		out = append(out, provider.Chunk{Generation: &g})
	}
	if f != nil && f.Kind == FaultNoFinish {
		return out
	}
	finish := provider.FinishReason(t.Finish)
	if finish == "" {
		finish = provider.FinishStop
		if len(t.ToolCalls) > 0 {
			finish = provider.FinishToolCalls
		}
	}
	return append(out, provider.Chunk{Finish: finish})
}

func usageOf(first, fallback *keel.Usage) *keel.Usage {
	switch {
	case first != nil:
		u := *first
		return &u
	case fallback != nil:
		u := *fallback
		return &u
	}
	return &keel.Usage{}
}

// CheckReasoning implements provider.ReasoningChecker: a script takes any
// setting, and keeps its turns' reasoning when asked for it.
func (p *Provider) CheckReasoning(string, keel.Reasoning) error { return nil }

// CheckInputs implements provider.InputChecker: a script takes any
// attachment (and reads none).
func (p *Provider) CheckInputs(string, []keel.AttachmentKind) error { return nil }
