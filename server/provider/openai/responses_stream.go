package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/provider"
)

// Bounds on what a hosted tool's output item puts in a
// keel.HostedToolActivity: the server's text is untrusted, and it ends up
// in events.
const (
	maxHostedURLs      = 20   // URLs kept per activity
	maxHostedURLLen    = 2048 // bytes; a longer URL is dropped, not cut
	maxHostedQueryLen  = 300  // runes of the query
	maxHostedDetailLen = 160  // runes of the detail
	maxHostedIDLen     = 128  // runes of the item's ID
)

// failedEvent is the error of a response.failed event without one.
var failedEvent = []byte(`{"error":{"message":"response failed","type":"server_error"}}`)

// streamResponses streams req as one Responses API request.
func (p *Provider) streamResponses(ctx context.Context, req provider.Request, yield func(provider.Chunk, error) bool) {
	params, err := p.responseParams(req)
	if err != nil {
		yield(provider.Chunk{}, err)
		return
	}
	var failed failedResponse
	stream := p.responses.NewStreaming(ctx, params, option.WithMiddleware(failed.capture))
	defer stream.Close()
	if err := stream.Err(); err != nil {
		yield(provider.Chunk{}, failure(ctx, err, &failed))
		return
	}
	if failed.json {
		yield(provider.Chunk{}, notStreamed(failed.status, failed.body))
		return
	}
	st := responseState{yield: yield}
	for stream.Next() {
		ev := stream.Current()
		if !st.handle(&ev) {
			return
		}
	}
	if err := ctx.Err(); err != nil {
		yield(provider.Chunk{}, err)
		return
	}
	err = stream.Err()
	var event *ssestream.StreamError
	var syntax *json.SyntaxError
	switch {
	case errors.As(err, &event):
		// An error event in the shape the API sends: {"type":"error","error":{...}}.
		yield(provider.Chunk{}, provider.Failure(Name, &provider.HTTPError{Status: http.StatusOK, Body: event.Event.Data}))
	case errors.As(err, &syntax):
		yield(provider.Chunk{}, &provider.MalformedError{Reason: "stream event is not valid JSON: " + syntax.Error()})
	case err != nil:
		yield(provider.Chunk{}, provider.Failure(Name, fmt.Errorf("%w: %w", provider.ErrStreamCut, err)))
	default:
		yield(provider.Chunk{}, provider.Failure(Name,
			fmt.Errorf("%w: connection closed before response.completed", provider.ErrStreamCut)))
	}
}

// responseState turns Responses API events into provider chunks.
type responseState struct {
	yield func(provider.Chunk, error) bool
	// calls are the function calls by output index.
	calls map[int64]*responseCall
	// sawReasoning: reasoning text was streamed; hidden: a reasoning item
	// came.
	sawReasoning, hidden bool
	searches             int64 // completed web searches
}

type responseCall struct {
	index       int
	named, args bool // its ID and name, its arguments were emitted
}

func (s *responseState) emit(c provider.Chunk) bool { return s.yield(c, nil) }

// call returns the function call at output index i, numbering new ones.
func (s *responseState) call(i int64) *responseCall {
	if s.calls == nil {
		s.calls = map[int64]*responseCall{}
	}
	c := s.calls[i]
	if c == nil {
		c = &responseCall{index: len(s.calls)}
		s.calls[i] = c
	}
	return c
}

// handle emits the pieces of one event. It returns false once the stream
// is over for the caller: the consumer stopped, a failure was yielded or
// the response ended.
func (s *responseState) handle(ev *responses.ResponseStreamEventUnion) bool {
	switch ev.Type {
	case "response.output_text.delta", "response.refusal.delta":
		return ev.Delta == "" || s.emit(provider.Chunk{Text: ev.Delta})
	case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
		s.sawReasoning = true
		return ev.Delta == "" || s.emit(provider.Chunk{Reasoning: ev.Delta})
	case "response.reasoning_summary_part.added":
		// The parts of a summary are joined by a blank line.
		return ev.SummaryIndex == 0 || s.emit(provider.Chunk{Reasoning: "\n\n"})
	case "response.output_item.added":
		if ev.Item.Type == "function_call" {
			c := s.call(ev.OutputIndex)
			c.named = true
			return s.emit(provider.Chunk{ToolCall: &provider.ToolCallDelta{Index: c.index, ID: ev.Item.CallID, Name: ev.Item.Name}})
		}
	case "response.function_call_arguments.delta":
		c := s.call(ev.OutputIndex)
		c.args = c.args || ev.Delta != ""
		return ev.Delta == "" || s.emit(provider.Chunk{ToolCall: &provider.ToolCallDelta{Index: c.index, Arguments: ev.Delta}})
	case "response.output_item.done":
		return s.itemDone(ev.OutputIndex, &ev.Item)
	case "response.completed", "response.incomplete":
		s.end(&ev.Response, ev.Type == "response.incomplete")
		return false
	case "response.failed":
		body := failedEvent
		if raw := ev.Response.JSON.Error.Raw(); ev.Response.JSON.Error.Valid() {
			body = []byte(raw)
		}
		s.yield(provider.Chunk{}, provider.Failure(Name, &provider.HTTPError{Status: http.StatusOK, Body: body}))
		return false
	case "error":
		// The documented shape, {"type":"error","code":...,"message":...}.
		s.yield(provider.Chunk{}, provider.Failure(Name, &provider.HTTPError{Status: http.StatusOK, Body: []byte(ev.RawJSON())}))
		return false
	}
	return true
}

// itemDone emits what a finished output item adds to what was streamed.
func (s *responseState) itemDone(i int64, item *responses.ResponseOutputItemUnion) bool {
	switch item.Type {
	case "reasoning":
		s.hidden = true
		text := make([]string, len(item.Summary))
		for j, part := range item.Summary {
			text[j] = part.Text
		}
		return s.emit(provider.Chunk{ReasoningPart: &keel.ReasoningPart{Provider: Name, ID: item.ID,
			Text: strings.Join(text, "\n\n"), Signature: item.EncryptedContent}})
	case "function_call":
		// Servers that do not stream a call send it whole here.
		c := s.call(i)
		d := provider.ToolCallDelta{Index: c.index}
		if !c.named {
			d.ID, d.Name, c.named = item.CallID, item.Name, true
		}
		if !c.args {
			d.Arguments, c.args = item.Arguments.OfString, true
		}
		return d == provider.ToolCallDelta{Index: c.index} || s.emit(provider.Chunk{ToolCall: &d})
	case "web_search_call", "file_search_call", "code_interpreter_call":
		if item.Type == "web_search_call" && item.Status == "completed" {
			s.searches++
		}
		return s.emit(provider.Chunk{Hosted: hostedActivity(item)})
	}
	return true
}

// end emits the finish reason and usage of a response that ended.
func (s *responseState) end(r *responses.Response, incomplete bool) {
	finish := provider.FinishStop
	switch {
	case incomplete && r.IncompleteDetails.Reason == "content_filter":
		finish = provider.FinishContentFilter
	case incomplete:
		finish = provider.FinishLength
	case len(s.calls) > 0:
		finish = provider.FinishToolCalls
	}
	if !s.emit(provider.Chunk{Finish: finish}) {
		return
	}
	if !r.JSON.Usage.Valid() && s.searches == 0 {
		return
	}
	u, gen := s.usage(&r.Usage)
	if s.emit(provider.Chunk{Usage: &u}) && gen != nil {
		s.emit(provider.Chunk{Generation: gen})
	}
}

// usage converts a usage report; input_tokens is the whole prompt and
// output_tokens includes reasoning. The generation-window count follows
// the Chat Completions rule: streamed reasoning counts whole, reasoning
// that never streamed is taken out, and a reasoning item without a token
// split leaves the count unavailable.
//
// What streams on this API is a summary of the reasoning, not the
// reasoning itself; the summary keeps pace with it, so most of the
// reasoning falls inside the window and the count keeps it all. What it
// overstates is the reasoning done before the first summary part arrived;
// taking all reasoning out would understate far more, since reasoning is
// most of a reasoning model's output.
func (s *responseState) usage(r *responses.ResponseUsage) (keel.Usage, *keel.GenerationTokens) {
	out := keel.Usage{
		InputTokens:      r.InputTokens,
		OutputTokens:     r.OutputTokens,
		CacheReadTokens:  r.InputTokensDetails.CachedTokens,
		CacheWriteTokens: r.InputTokensDetails.CacheWriteTokens,
		ReasoningTokens:  r.OutputTokensDetails.ReasoningTokens,
		WebSearches:      s.searches,
	}
	switch {
	case r.OutputTokensDetails.JSON.ReasoningTokens.Valid():
		n := r.OutputTokens
		if !s.sawReasoning {
			n = max(n-r.OutputTokensDetails.ReasoningTokens, 0)
		}
		return out, &keel.GenerationTokens{Kind: keel.GenerationReported, N: n}
	case s.hidden && !s.sawReasoning:
		return out, &keel.GenerationTokens{Kind: keel.GenerationUnavailable}
	}
	return out, nil
}

// hostedActivity describes a hosted tool's finished output item, within
// the bounds above.
func hostedActivity(item *responses.ResponseOutputItemUnion) *keel.HostedToolActivity {
	h := &keel.HostedToolActivity{ID: clip(provider.Sanitize(item.ID), maxHostedIDLen)}
	var query, detail string
	switch item.Type {
	case "web_search_call":
		a := &item.Action
		h.Name, query = HostedWebSearch, a.Query
		if query == "" {
			query = strings.Join(a.Queries, "; ")
		}
		switch a.Type {
		case "open_page":
			detail = "opened a page"
		case "find_in_page":
			detail, query = "searched a page", a.Pattern
		default:
			detail = "searched the web"
		}
		h.URLs = addURL(h.URLs, a.URL)
		for _, src := range a.Sources {
			h.URLs = addURL(h.URLs, src.URL)
		}
	case "file_search_call":
		h.Name, detail, query = HostedFileSearch, "searched files", strings.Join(item.Queries, "; ")
	case "code_interpreter_call":
		line, _, _ := strings.Cut(strings.TrimSpace(item.Code), "\n")
		h.Name, detail = HostedCodeInterpreter, "ran code: "+line
	}
	if item.Status != "" && item.Status != "completed" {
		detail += " (" + item.Status + ")"
	}
	h.Query = clip(provider.Sanitize(query), maxHostedQueryLen)
	h.Detail = clip(provider.Sanitize(detail), maxHostedDetailLen)
	return h
}

// addURL appends u to urls if it is an absolute http(s) URL of bounded
// length without spaces or control characters, new, and there is room.
func addURL(urls []string, u string) []string {
	if u == "" || len(urls) >= maxHostedURLs || len(u) > maxHostedURLLen || !utf8.ValidString(u) ||
		strings.ContainsFunc(u, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) ||
		slices.Contains(urls, u) {
		return urls
	}
	if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return urls
	}
	return append(urls, u)
}

// clip cuts s to n runes, marking the cut with "…".
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
