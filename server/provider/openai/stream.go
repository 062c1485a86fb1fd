package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/respjson"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/provider"
)

// maxErrorBody bounds how much of an error response is kept.
const maxErrorBody = 64 << 10

var doneMarker = []byte("[DONE]")

// readStream yields the chunks of a streamed Chat Completion.
func readStream(ctx context.Context, res *http.Response, yield func(provider.Chunk, error) bool) {
	if isJSON(res) {
		body, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
		yield(provider.Chunk{}, notStreamed(res.StatusCode, body))
		return
	}
	st := streamState{yield: yield}
	dec := ssestream.NewDecoder(res)
	for dec.Next() {
		ev := dec.Event()
		data := bytes.TrimSpace(ev.Data)
		if len(data) == 0 {
			continue
		}
		if bytes.Equal(data, doneMarker) {
			st.done = true
			break
		}
		if ev.Type == "error" || hasErrorField(data) {
			yield(provider.Chunk{}, provider.Failure(Name, &provider.HTTPError{Status: res.StatusCode, Body: data}))
			return
		}
		var chunk oai.ChatCompletionChunk
		if err := json.Unmarshal(data, &chunk); err != nil {
			yield(provider.Chunk{}, &provider.MalformedError{
				Reason: "stream chunk is not valid JSON: " + provider.Sanitize(string(data[:min(len(data), 200)]))})
			return
		}
		if !st.handle(&chunk) {
			return
		}
	}
	if err := ctx.Err(); err != nil {
		yield(provider.Chunk{}, err)
		return
	}
	// A finish reason means the answer is complete even if [DONE] (and the
	// usage chunk) never came; without either the answer was cut off.
	if st.done || st.finished {
		return
	}
	cut := fmt.Errorf("%w: connection closed before [DONE]", provider.ErrStreamCut)
	if err := dec.Err(); err != nil {
		cut = fmt.Errorf("%w: %w", provider.ErrStreamCut, err)
	}
	yield(provider.Chunk{}, provider.Failure(Name, cut))
}

// isJSON reports whether res is one JSON document.
func isJSON(res *http.Response) bool {
	mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
	return mt == "application/json"
}

// notStreamed handles a server that answered with one JSON document instead
// of an event stream: either an error object or a sign it ignored "stream".
func notStreamed(status int, body []byte) error {
	if hasErrorField(body) {
		return provider.Failure(Name, &provider.HTTPError{Status: status, Body: body})
	}
	return &keel.ProviderError{Provider: Name, Kind: keel.ProviderInvalidRequest,
		Message: "server answered with a JSON document instead of an event stream; it may not support streaming"}
}

// hasErrorField reports whether data is a JSON object with a non-null
// top-level "error" member: how OpenAI-compatible servers report a failure
// inside a stream.
func hasErrorField(data []byte) bool {
	if !bytes.Contains(data, []byte(`"error"`)) {
		return false
	}
	var probe struct {
		Error json.RawMessage `json:"error"`
	}
	return json.Unmarshal(data, &probe) == nil && len(probe.Error) > 0 && !bytes.Equal(probe.Error, []byte("null"))
}

// streamState turns Chat Completion chunks into provider chunks.
type streamState struct {
	yield        func(provider.Chunk, error) bool
	done         bool // saw [DONE]
	finished     bool // saw a finish reason
	sawReasoning bool
	// Tool call numbering for servers that leave out "index".
	calls  int
	last   int
	lastID string
}

func (s *streamState) emit(c provider.Chunk) bool { return s.yield(c, nil) }

// handle emits the pieces of one chunk; false means the consumer stopped.
func (s *streamState) handle(ch *oai.ChatCompletionChunk) bool {
	for i := range ch.Choices {
		c := &ch.Choices[i]
		if c.Index != 0 {
			continue // keel asks for one choice
		}
		d := &c.Delta
		if r := reasoningText(d); r != "" {
			s.sawReasoning = true
			if !s.emit(provider.Chunk{Reasoning: r}) {
				return false
			}
		}
		if d.Content != "" && !s.emit(provider.Chunk{Text: d.Content}) {
			return false
		}
		if d.Refusal != "" && !s.emit(provider.Chunk{Text: d.Refusal}) {
			return false
		}
		for j := range d.ToolCalls {
			tc := &d.ToolCalls[j]
			if tc.ID == "" && tc.Function.Name == "" && tc.Function.Arguments == "" {
				continue
			}
			delta := &provider.ToolCallDelta{Index: s.callIndex(tc), ID: tc.ID,
				Name: tc.Function.Name, Arguments: tc.Function.Arguments}
			if !s.emit(provider.Chunk{ToolCall: delta}) {
				return false
			}
		}
		if c.FinishReason != "" {
			s.finished = true
			if !s.emit(provider.Chunk{Finish: finishReason(c.FinishReason)}) {
				return false
			}
		}
	}
	if ch.JSON.Usage.Valid() {
		u, gen := usage(&ch.Usage, s.sawReasoning)
		if !s.emit(provider.Chunk{Usage: &u}) {
			return false
		}
		if gen != nil && !s.emit(provider.Chunk{Generation: gen}) {
			return false
		}
	}
	return true
}

// callIndex numbers a tool call fragment. Servers that omit "index" send
// each call whole, or its first fragment with an ID; a new ID starts a new
// call and a fragment without one continues the last.
func (s *streamState) callIndex(tc *oai.ChatCompletionChunkChoiceDeltaToolCall) int {
	if tc.JSON.Index.Valid() {
		s.last = int(tc.Index)
		s.calls = max(s.calls, s.last+1)
		return s.last
	}
	if tc.ID != "" && (s.calls == 0 || tc.ID != s.lastID) {
		s.last = s.calls
		s.calls++
		s.lastID = tc.ID
	}
	return s.last
}

// reasoningText reads the reasoning delta that DeepSeek, llama.cpp and
// older vLLM call "reasoning_content" and newer vLLM, Ollama and OpenRouter
// call "reasoning". The SDK's types have neither, so it reads the raw JSON.
func reasoningText(d *oai.ChatCompletionChunkChoiceDelta) string {
	for _, key := range []string{"reasoning_content", "reasoning"} {
		var s string
		if extra(d.JSON.ExtraFields, key, &s) && s != "" {
			return s
		}
	}
	return ""
}

// extra decodes the unknown field key into v. The SDK keeps such fields raw
// and marks them invalid (it has no type for them), so Valid is no guide.
func extra(fields map[string]respjson.Field, key string, v any) bool {
	f, ok := fields[key]
	if !ok || f.Raw() == "" || f.Raw() == respjson.Null {
		return false
	}
	return json.Unmarshal([]byte(f.Raw()), v) == nil
}

func finishReason(r string) provider.FinishReason {
	switch r {
	case "tool_calls", "function_call":
		return provider.FinishToolCalls
	case "length":
		return provider.FinishLength
	case "content_filter":
		return provider.FinishContentFilter
	default:
		return provider.FinishStop
	}
}

// usage converts a usage report. The generation-window count: the window
// runs from the first streamed delta of any kind (text, reasoning or tool
// call) to the end of the stream. Reasoning that was streamed was generated
// inside it, so every completion token counts; reasoning that stayed hidden
// was generated before the first visible delta, so its tokens are taken out.
// Without a reasoning breakdown there is no generation count.
func usage(u *oai.CompletionUsage, sawReasoning bool) (keel.Usage, *keel.GenerationTokens) {
	out := keel.Usage{
		InputTokens:      u.PromptTokens,
		OutputTokens:     u.CompletionTokens,
		CacheReadTokens:  u.PromptTokensDetails.CachedTokens,
		CacheWriteTokens: u.PromptTokensDetails.CacheWriteTokens,
		ReasoningTokens:  u.CompletionTokensDetails.ReasoningTokens,
	}
	if out.CacheReadTokens == 0 {
		// DeepSeek reports cache hits in a field of its own.
		var n int64
		if extra(u.JSON.ExtraFields, "prompt_cache_hit_tokens", &n) {
			out.CacheReadTokens = n
		}
	}
	if !u.CompletionTokensDetails.JSON.ReasoningTokens.Valid() {
		return out, nil
	}
	n := u.CompletionTokens
	if !sawReasoning {
		n = max(n-u.CompletionTokensDetails.ReasoningTokens, 0)
	}
	return out, &keel.GenerationTokens{Kind: keel.GenerationReported, N: n}
}

// failedResponse keeps a copy of an error response, for bodies the SDK
// cannot parse into its error type (Ollama's {"error":"text"}, plain text),
// and of a success that is one JSON document rather than a stream.
type failedResponse struct {
	status int
	header http.Header
	body   []byte
	json   bool // a success that is one JSON document
}

func (f *failedResponse) capture(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := next(req)
	if err != nil || res == nil || res.StatusCode < 400 && !isJSON(res) {
		return res, err
	}
	f.json = res.StatusCode < 400
	body, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
	_ = res.Body.Close()
	res.Body = io.NopCloser(bytes.NewReader(body))
	f.status, f.header, f.body = res.StatusCode, res.Header.Clone(), body
	return res, nil
}

// failure classifies an error from sending the request.
func failure(ctx context.Context, err error, f *failedResponse) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	var apiErr *oai.Error
	switch {
	case errors.As(err, &apiErr) && apiErr.StatusCode >= 400:
		he := &provider.HTTPError{Status: apiErr.StatusCode, Body: f.body}
		if apiErr.Response != nil {
			he.Header = apiErr.Response.Header
		}
		if he.Body == nil {
			he.Body = []byte(apiErr.RawJSON())
		}
		err = he
	case f.status >= 400:
		err = &provider.HTTPError{Status: f.status, Header: f.header, Body: f.body}
	}
	return provider.Failure(Name, err)
}
