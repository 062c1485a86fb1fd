package anthropic

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	sdk "github.com/anthropics/anthropic-sdk-go"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/provider"
)

// streamState turns Messages stream events into provider chunks.
type streamState struct {
	yield func(provider.Chunk, error) bool

	stopped  bool // saw message_stop
	finished bool // saw a stop reason

	// tools maps content block indexes to tool call numbers (0, 1, ...).
	tools map[int64]*toolBlock
	calls int

	// answerTool says the request offered provider.AnswerTool; answered,
	// that the model called it. Its input is the answer, streamed as
	// Answer chunks, never as a tool call.
	answerTool, answered bool

	sawThinking bool // thinking was streamed
	sawRedacted bool // thinking stayed hidden (redacted_thinking)

	// thinking holds the reasoning blocks by content block index until
	// they end; hosted, the server tool uses by their ID until their
	// results come.
	reasoning map[int64]*keel.ReasoningPart
	hosted    map[string]*hostedUse
	uses      map[int64]*hostedUse // server_tool_use blocks by index
	searches  int64

	input, cacheRead, cacheWrite, output, thinking int64
	thinkingReported                               bool
}

// hostedUse is a server tool use whose result has not come yet.
type hostedUse struct {
	id, name string
	input    strings.Builder
}

type toolBlock struct {
	index int
	// startInput is the input sent whole in content_block_start, used only
	// if no input_json_delta follows (servers that do not stream tool input).
	startInput string
	streamed   bool
	answer     bool
}

func (s *streamState) emit(c provider.Chunk) bool { return s.yield(c, nil) }

// handle emits the chunks of one event; false means the consumer stopped.
func (s *streamState) handle(ev sdk.MessageStreamEventUnion) bool {
	switch ev.Type {
	case "message_start":
		u := ev.Message.Usage
		s.input, s.cacheRead, s.cacheWrite = u.InputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens
		s.output = u.OutputTokens
		return s.emitUsage()
	case "content_block_start":
		b := ev.ContentBlock
		switch b.Type {
		case "tool_use":
			if s.tools == nil {
				s.tools = map[int64]*toolBlock{}
			}
			if s.answerTool && b.Name == provider.AnswerTool {
				s.tools[ev.Index] = &toolBlock{startInput: b.JSON.Input.Raw(), answer: true}
				s.answered = true
				return true
			}
			tb := &toolBlock{index: s.calls, startInput: b.JSON.Input.Raw()}
			s.tools[ev.Index] = tb
			s.calls++
			return s.emit(provider.Chunk{ToolCall: &provider.ToolCallDelta{Index: tb.index, ID: b.ID, Name: b.Name}})
		case "text":
			if b.Text != "" {
				return s.emit(provider.Chunk{Text: b.Text})
			}
		case "thinking":
			s.keepReasoning(ev.Index, &keel.ReasoningPart{Provider: Name, Text: b.Thinking, Signature: b.Signature})
			if b.Thinking != "" {
				s.sawThinking = true
				return s.emit(provider.Chunk{Reasoning: b.Thinking})
			}
		case "redacted_thinking":
			s.sawRedacted = true
			s.keepReasoning(ev.Index, &keel.ReasoningPart{Provider: Name, Redacted: true, Signature: b.Data})
		case "server_tool_use":
			u := &hostedUse{id: b.ID, name: b.Name}
			if raw := b.JSON.Input.Raw(); hasInput(raw) {
				u.input.WriteString(raw)
			}
			if s.uses == nil {
				s.uses, s.hosted = map[int64]*hostedUse{}, map[string]*hostedUse{}
			}
			s.uses[ev.Index] = u
			s.hosted[b.ID] = u
		default:
			if strings.HasSuffix(b.Type, "_tool_result") && b.ToolUseID != "" {
				return s.hostedResult(b.ToolUseID, b.Type, b.JSON.Content.Raw())
			}
		}
	case "content_block_delta":
		d := ev.Delta
		switch d.Type {
		case "text_delta":
			if d.Text != "" {
				return s.emit(provider.Chunk{Text: d.Text})
			}
		case "thinking_delta":
			if r := s.reasoning[ev.Index]; r != nil {
				r.Text += d.Thinking
			}
			if d.Thinking != "" {
				s.sawThinking = true
				return s.emit(provider.Chunk{Reasoning: d.Thinking})
			}
		case "signature_delta":
			if r := s.reasoning[ev.Index]; r != nil {
				r.Signature += d.Signature
			}
		case "input_json_delta":
			if u := s.uses[ev.Index]; u != nil && u.input.Len() < maxHostedInput {
				u.input.WriteString(d.PartialJSON)
				return true
			}
			tb := s.tools[ev.Index]
			if tb == nil || d.PartialJSON == "" {
				return true
			}
			tb.streamed = true
			if tb.answer {
				return s.emit(provider.Chunk{Answer: d.PartialJSON})
			}
			return s.emit(provider.Chunk{ToolCall: &provider.ToolCallDelta{Index: tb.index, Arguments: d.PartialJSON}})
		}
	case "content_block_stop":
		if r := s.reasoning[ev.Index]; r != nil {
			delete(s.reasoning, ev.Index)
			return s.emit(provider.Chunk{ReasoningPart: r})
		}
		tb := s.tools[ev.Index]
		if tb != nil && tb.answer && !tb.streamed {
			return s.emit(provider.Chunk{Answer: tb.startInput})
		}
		if tb != nil && !tb.streamed && hasInput(tb.startInput) {
			return s.emit(provider.Chunk{ToolCall: &provider.ToolCallDelta{Index: tb.index, Arguments: tb.startInput}})
		}
	case "message_delta":
		// Server tool uses whose results never came (a paused turn) are
		// reported as they are.
		for _, id := range slices.Sorted(maps.Keys(s.hosted)) {
			if !s.hostedResult(id, "", "") {
				return false
			}
		}
		if r := ev.Delta.StopReason; r != "" {
			s.finished = true
			finish := stopReason(r)
			if finish == provider.FinishToolCalls && s.answered && s.calls == 0 {
				// The answer tool alone: the model ended its turn.
				finish = provider.FinishStop
			}
			if !s.emit(provider.Chunk{Finish: finish}) {
				return false
			}
		}
		u := ev.Usage
		// message_delta counts are cumulative; input counts appear here only
		// in newer API versions, so zero means "not reported".
		s.output = max(s.output, u.OutputTokens)
		s.input = max(s.input, u.InputTokens)
		s.cacheRead = max(s.cacheRead, u.CacheReadInputTokens)
		s.cacheWrite = max(s.cacheWrite, u.CacheCreationInputTokens)
		s.searches = max(s.searches, u.ServerToolUse.WebSearchRequests)
		if u.OutputTokensDetails.JSON.ThinkingTokens.Valid() {
			s.thinking, s.thinkingReported = u.OutputTokensDetails.ThinkingTokens, true
		}
		if !s.emitUsage() {
			return false
		}
		if g := s.generation(); g != nil {
			return s.emit(provider.Chunk{Generation: g})
		}
	case "message_stop":
		s.stopped = true
	}
	return true
}

// emitUsage reports the counts so far. Anthropic's input_tokens leaves out
// cached tokens; keel's InputTokens is the whole prompt, so they are added.
func (s *streamState) emitUsage() bool {
	u := keel.Usage{
		InputTokens:      s.input + s.cacheRead + s.cacheWrite,
		OutputTokens:     s.output,
		CacheReadTokens:  s.cacheRead,
		CacheWriteTokens: s.cacheWrite,
		ReasoningTokens:  s.thinking,
		WebSearches:      s.searches,
	}
	return s.emit(provider.Chunk{Usage: &u})
}

func (s *streamState) keepReasoning(index int64, r *keel.ReasoningPart) {
	if s.reasoning == nil {
		s.reasoning = map[int64]*keel.ReasoningPart{}
	}
	s.reasoning[index] = r
}

// Bounds of what a hosted tool use reports: the server's input and
// results are untrusted, and the report is durable.
const (
	maxHostedInput  = 16 << 10
	maxHostedURLs   = 20
	maxHostedURL    = 512
	maxHostedDetail = 200
)

// hostedResult reports the server tool use id, with its result content
// (raw JSON of kind kind) when one came.
func (s *streamState) hostedResult(id, kind, content string) bool {
	u := s.hosted[id]
	if u == nil {
		return true
	}
	delete(s.hosted, id)
	for i, x := range s.uses {
		if x == u {
			delete(s.uses, i)
		}
	}
	h := &keel.HostedToolActivity{Name: provider.Sanitize(clip(u.name, 64)), ID: clip(id, 128)}
	var in struct {
		Query string `json:"query"`
		Code  string `json:"code"`
	}
	_ = json.Unmarshal([]byte(u.input.String()), &in)
	h.Query = provider.Sanitize(clip(in.Query, maxHostedDetail))
	var results []struct {
		Type       string `json:"type"`
		URL        string `json:"url"`
		ReturnCode *int   `json:"return_code"`
		ErrorCode  string `json:"error_code"`
	}
	var one struct {
		Type       string `json:"type"`
		ReturnCode *int   `json:"return_code"`
		ErrorCode  string `json:"error_code"`
	}
	switch {
	case kind == "":
		h.Detail = "no result"
	case json.Unmarshal([]byte(content), &results) == nil:
		for _, r := range results {
			if r.URL != "" && len(h.URLs) < maxHostedURLs {
				h.URLs = append(h.URLs, provider.Sanitize(clip(r.URL, maxHostedURL)))
			}
		}
		h.Detail = fmt.Sprintf("%d results", len(results))
	case json.Unmarshal([]byte(content), &one) == nil:
		switch {
		case one.ErrorCode != "":
			h.Detail = "error: " + provider.Sanitize(clip(one.ErrorCode, 64))
		case one.ReturnCode != nil:
			h.Detail = fmt.Sprintf("exit %d", *one.ReturnCode)
		}
	}
	if h.Query == "" && in.Code != "" {
		h.Detail = strings.TrimSpace(provider.Sanitize(clip(in.Code, maxHostedDetail)) + " · " + h.Detail)
	}
	return s.emit(provider.Chunk{Hosted: h})
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// generation is the generation-window count: the window runs from the first
// streamed delta to the end of the stream. Streamed thinking (even when the
// API summarizes it) was generated inside the window, so every output token
// counts; thinking that never streamed was generated before the first delta,
// so its tokens are taken out. Hidden thinking without a token split leaves
// the count unavailable; no thinking at all leaves it to the aggregate.
func (s *streamState) generation() *keel.GenerationTokens {
	switch {
	case s.thinkingReported && s.sawThinking:
		return &keel.GenerationTokens{Kind: keel.GenerationReported, N: s.output}
	case s.thinkingReported:
		return &keel.GenerationTokens{Kind: keel.GenerationReported, N: max(s.output-s.thinking, 0)}
	case s.sawRedacted:
		return &keel.GenerationTokens{Kind: keel.GenerationUnavailable}
	}
	return nil
}

func hasInput(raw string) bool {
	raw = strings.TrimSpace(raw)
	return raw != "" && raw != "{}" && raw != "null"
}

func stopReason(r sdk.StopReason) provider.FinishReason {
	switch r {
	case sdk.StopReasonToolUse:
		return provider.FinishToolCalls
	case sdk.StopReasonMaxTokens, sdk.StopReasonModelContextWindowExceeded:
		return provider.FinishLength
	case sdk.StopReasonRefusal:
		return provider.FinishContentFilter
	default: // end_turn, stop_sequence, pause_turn
		return provider.FinishStop
	}
}

// failure classifies the error a stream ended with. res is the response,
// when one arrived.
func failure(err error, res *http.Response) error {
	var (
		apiErr  *sdk.Error
		syntax  *json.SyntaxError
		typeErr *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &apiErr):
		// An error status, or an error event inside the stream (then the
		// status is the stream's 200 and the headers are not the error's).
		he := &provider.HTTPError{Status: apiErr.StatusCode, Body: []byte(apiErr.RawJSON())}
		if apiErr.StatusCode >= 400 && apiErr.Response != nil {
			he.Header = apiErr.Response.Header
		}
		err = he
	case errors.As(err, &syntax) || errors.As(err, &typeErr):
		return &provider.MalformedError{Reason: "stream event is not valid JSON: " + provider.Sanitize(err.Error())}
	case res != nil && res.StatusCode < 400:
		// The response had begun, so the body broke off mid-stream.
		err = fmt.Errorf("%w: %w", provider.ErrStreamCut, err)
	}
	return provider.Failure(Name, err)
}
