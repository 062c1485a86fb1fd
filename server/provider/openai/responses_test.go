package openai

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3/responses"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/provider"
	"github.com/keelrun/keel/server/provider/providertest"
)

// responsesSubject is the provider on the Responses API, for the shared
// checks and the tests here.
var responsesSubject = providertest.Subject{
	Name: Name,
	New: func(baseURL string, client *http.Client) (provider.Provider, error) {
		return New(Config{BaseURL: baseURL + "/v1", APIKey: testKey, HTTPClient: client, API: APIResponses})
	},
	Request: subject.Request,
	FirstEvent: "event: response.output_text.delta\n" +
		`data: {"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"first","logprobs":[]}` + "\n\n",
}

// The encrypted content of the reasoning items in the fixtures.
const (
	encToolCalls = "gAAAAABpVfX0kq3VZc8Yq1n0dE5rWm7Hk2sQ9Lw4JxT1pUo6yBf3Ga8NcR5vDe0MhKj_lt2XiZs7OqWb4Ye9Fd1Cg6Ah3Bk8Jm5Nr0Pu2Sw7Tz4Vx9Qa1Lc6Ef3Gh8Ij0Kl5Mn2Op7Qr4St9Uv1Wx6Yz3=="
	encHidden    = "gAAAAABpVfX1Xw8Rq2LmN4vB7cT0yH5kJ9sE3uW6pZ1aD8fG2hK4lM7nQ0rS5tV9xY3bC6eF1gI4jL8oP2qU5wZ0_-AaBbCcDdEeFfGgHhIiJjKkLlMmNnOoPp=="
)

var toolCallsReasoning = keel.ReasoningPart{Provider: Name, ID: "rs_tools1",
	Text:      "**Weather in two cities**\n\nThe user asks for Paris and Rome.\n\nCalling get_weather for each.",
	Signature: encToolCalls}

func TestResponsesStreamFixtures(t *testing.T) {
	webSearch := keel.HostedToolActivity{Name: HostedWebSearch, ID: "ws_1", Detail: "searched the web",
		Query: "temporal durable execution go sdk",
		URLs:  []string{"https://docs.temporal.io/develop/go", "https://github.com/temporalio/sdk-go"}}
	providertest.CheckStreams(t, responsesSubject, []providertest.Stream{
		{
			Fixture: "responses_text.sse",
			Chunks: []provider.Chunk{
				{Text: "Hello"}, {Text: ", world"}, {Text: "!"}, {Finish: provider.FinishStop},
				providertest.UsageChunk(keel.Usage{InputTokens: 25, OutputTokens: 4, CacheReadTokens: 16}),
				providertest.GenerationChunk(keel.GenerationReported, 4),
			},
			Response: &provider.Response{Text: "Hello, world!", Finish: provider.FinishStop,
				Usage:      keel.Usage{InputTokens: 25, OutputTokens: 4, CacheReadTokens: 16, Requests: 1},
				Generation: keel.GenerationTokens{Kind: keel.GenerationReported, N: 4}},
		},
		{
			// A reasoning item whose summary streamed in two parts, then
			// two function calls. The summary kept pace with the
			// reasoning, so all 140 output tokens are in the window.
			Fixture: "responses_tool_calls.sse",
			Chunks: []provider.Chunk{
				{Reasoning: "**Weather in two cities**"}, {Reasoning: "\n\nThe user asks for Paris and Rome."},
				{Reasoning: "\n\n"}, {Reasoning: "Calling get_weather"}, {Reasoning: " for each."},
				{ReasoningPart: &toolCallsReasoning},
				providertest.ToolCallChunk(0, "call_paris", "get_weather", ""),
				providertest.ToolCallChunk(0, "", "", `{"city`),
				providertest.ToolCallChunk(0, "", "", `":"Par`),
				providertest.ToolCallChunk(0, "", "", `is"}`),
				providertest.ToolCallChunk(1, "call_rome", "get_weather", ""),
				providertest.ToolCallChunk(1, "", "", `{"city":"Ro`),
				providertest.ToolCallChunk(1, "", "", `me"}`),
				{Finish: provider.FinishToolCalls},
				providertest.UsageChunk(keel.Usage{InputTokens: 80, OutputTokens: 140, CacheReadTokens: 64, ReasoningTokens: 96}),
				providertest.GenerationChunk(keel.GenerationReported, 140),
			},
			Response: &provider.Response{
				ToolCalls: []keel.ToolCall{
					{ID: "call_paris", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)},
					{ID: "call_rome", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Rome"}`)},
				},
				Finish:     provider.FinishToolCalls,
				Usage:      keel.Usage{InputTokens: 80, OutputTokens: 140, CacheReadTokens: 64, ReasoningTokens: 96, Requests: 1},
				Generation: keel.GenerationTokens{Kind: keel.GenerationReported, N: 140},
				Reasoning:  []keel.ReasoningPart{toolCallsReasoning},
			},
		},
		{
			// Reasoning without a summary: its 128 tokens came before the
			// first delta.
			Fixture: "responses_hidden_reasoning.sse",
			Chunks: []provider.Chunk{
				{ReasoningPart: &keel.ReasoningPart{Provider: Name, ID: "rs_hidden1", Signature: encHidden}},
				{Text: "42"}, {Finish: provider.FinishStop},
				providertest.UsageChunk(keel.Usage{InputTokens: 20, OutputTokens: 130, ReasoningTokens: 128}),
				providertest.GenerationChunk(keel.GenerationReported, 2),
			},
		},
		{
			// Hidden reasoning and no split of the output tokens (a
			// compatible server): the window's count is unknown.
			Fixture: "responses_no_split.sse",
			Response: &provider.Response{Text: "Done.", Finish: provider.FinishStop,
				Usage:      keel.Usage{InputTokens: 9, OutputTokens: 40, Requests: 1},
				Generation: keel.GenerationTokens{Kind: keel.GenerationUnavailable},
				Reasoning:  []keel.ReasoningPart{{Provider: Name, ID: "rs_nosplit1"}}},
		},
		{
			Fixture: "responses_web_search.sse",
			Chunks: []provider.Chunk{
				{Hosted: &webSearch},
				{Text: "Temporal has an official Go SDK"},
				{Text: " ([docs.temporal.io](https://docs.temporal.io/develop/go?utm_source=openai))."},
				{Finish: provider.FinishStop},
				providertest.UsageChunk(keel.Usage{InputTokens: 8453, OutputTokens: 62, WebSearches: 1}),
				providertest.GenerationChunk(keel.GenerationReported, 62),
			},
			Response: &provider.Response{
				Text:       "Temporal has an official Go SDK ([docs.temporal.io](https://docs.temporal.io/develop/go?utm_source=openai)).",
				Finish:     provider.FinishStop,
				Usage:      keel.Usage{InputTokens: 8453, OutputTokens: 62, WebSearches: 1, Requests: 1},
				Generation: keel.GenerationTokens{Kind: keel.GenerationReported, N: 62},
				Hosted:     []keel.HostedToolActivity{webSearch},
			},
		},
		{
			Fixture: "responses_hosted.sse",
			Response: &provider.Response{Text: "Done.", Finish: provider.FinishStop,
				Usage:      keel.Usage{InputTokens: 1200, OutputTokens: 90, Requests: 1},
				Generation: keel.GenerationTokens{Kind: keel.GenerationReported, N: 90},
				Hosted: []keel.HostedToolActivity{
					{Name: HostedFileSearch, ID: "fs_1", Detail: "searched files", Query: "deployment checklist; rollback steps"},
					{Name: HostedCodeInterpreter, ID: "ci_1", Detail: "ran code: import math"},
				}},
		},
		{
			Fixture: "responses_incomplete.sse",
			Response: &provider.Response{Text: "The answer is", Finish: provider.FinishLength,
				Usage:      keel.Usage{InputTokens: 30, OutputTokens: 3, Requests: 1},
				Generation: keel.GenerationTokens{Kind: keel.GenerationReported, N: 3}},
		},
		{
			Fixture: "responses_content_filter.sse",
			Chunks: []provider.Chunk{{Text: "Here is"}, {Finish: provider.FinishContentFilter},
				providertest.UsageChunk(keel.Usage{InputTokens: 30, OutputTokens: 2}),
				providertest.GenerationChunk(keel.GenerationReported, 2)},
		},
	})
}

func TestResponsesStreamFailures(t *testing.T) {
	providertest.CheckStreamFailures(t, responsesSubject, []providertest.StreamFailure{
		// The connection drops mid-response.
		{Fixture: "responses_cut.sse", Kind: keel.ProviderStreamCut, Retryable: true, Partial: "The answer is"},
		// The body ends cleanly without response.completed.
		{Fixture: "responses_ended_early.sse", Kind: keel.ProviderStreamCut, Retryable: true, Partial: "The answer"},
		// response.failed carries the response's error.
		{Fixture: "responses_failed.sse", Kind: keel.ProviderServer, Retryable: true,
			Message: "An error occurred while processing your request", Partial: "Partial"},
		// An error event as the API sends it, its error nested.
		{Fixture: "responses_error.sse", Kind: keel.ProviderInvalidRequest, Message: "You exceeded your current quota"},
		// An error event in the documented shape, its fields at the top.
		{Fixture: "responses_error_flat.sse", Kind: keel.ProviderRateLimited, Retryable: true,
			Message: "Rate limit reached", Partial: "Partial"},
	})

	t.Run("responses_bad_event.sse", func(t *testing.T) {
		srv := providertest.NewServer(t, providertest.SSE(t, "testdata/responses_bad_event.sse"))
		chunks, err := providertest.Collect(t, responsesSubject.Provider(t, srv.URL).Stream(context.Background(), subject.Request))
		var mal *provider.MalformedError
		if !errors.As(err, &mal) {
			t.Fatalf("stream error = %T %v, want *provider.MalformedError", err, err)
		}
		if diff := cmp.Diff([]provider.Chunk{{Text: "ok"}}, chunks); diff != "" {
			t.Errorf("chunks before the error (-want +got):\n%s", diff)
		}
	})
}

func TestResponsesHTTPErrors(t *testing.T) {
	providertest.CheckHTTPErrors(t, responsesSubject, httpErrors())
}

func TestResponsesConnectionRefused(t *testing.T) {
	providertest.CheckConnectionRefused(t, responsesSubject)
}

func TestResponsesEarlyStopClosesBody(t *testing.T) {
	providertest.CheckEarlyStopClosesBody(t, responsesSubject)
}

func TestResponsesCancelMidStream(t *testing.T) {
	providertest.CheckCancelMidStream(t, responsesSubject)
}

func TestResponsesRequestErrorsArePermanent(t *testing.T) {
	providertest.CheckBadRequests(t, responsesSubject, []providertest.BadRequest{
		{Name: "no model", Request: provider.Request{Messages: subject.Request.Messages}, Kind: keel.ProviderUnknownModel},
		{Name: "bad role", Request: provider.Request{Model: "m", Messages: []keel.Message{{Role: "robot", Content: "x"}}}, Kind: keel.ProviderInvalidRequest},
		{Name: "bad schema", Request: provider.Request{Model: "m", Messages: subject.Request.Messages,
			Tools: []keel.ToolSpec{{Name: "t", Parameters: json.RawMessage(`[1,2]`)}}}, Kind: keel.ProviderInvalidRequest},
		{Name: "reasoning budget", Request: provider.Request{Model: "m", Messages: subject.Request.Messages,
			Reasoning: keel.Reasoning{Effort: keel.ReasoningLow, BudgetTokens: 4096}}, Kind: keel.ProviderInvalidRequest},
		{Name: "unknown effort", Request: provider.Request{Model: "m", Messages: subject.Request.Messages,
			Reasoning: keel.Reasoning{Effort: "extreme"}}, Kind: keel.ProviderInvalidRequest},
	})
}

// A server that answers with one JSON document instead of a stream.
func TestResponsesNotStreamed(t *testing.T) {
	srv := providertest.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"resp_1","object":"response","status":"completed","output":[]}`))
	})
	_, err := providertest.Collect(t, responsesSubject.Provider(t, srv.URL).Stream(context.Background(), subject.Request))
	var pe *keel.ProviderError
	if !errors.As(err, &pe) || pe.Kind != keel.ProviderInvalidRequest || pe.Retryable {
		t.Fatalf("error = %v, want permanent invalid_request", err)
	}
}

// The whole transcript goes as input items, with nothing kept on the
// server: the system prompt as instructions, tool results as
// function_call_output items, an aborted message as plain text.
func TestResponsesRequestBody(t *testing.T) {
	srv := providertest.NewServer(t, providertest.SSE(t, "testdata/responses_text.sse"))
	_, err := providertest.Collect(t, responsesSubject.Provider(t, srv.URL).Stream(context.Background(), weatherTranscript()))
	if err != nil {
		t.Fatal(err)
	}
	got := srv.Last()
	if got.Method != http.MethodPost || got.Path != "/v1/responses" {
		t.Errorf("request %s %s, want POST /v1/responses", got.Method, got.Path)
	}
	if auth := got.Header.Get("Authorization"); auth != "Bearer "+testKey {
		t.Errorf("Authorization = %q", auth)
	}
	want := jsonValue(t, providertest.Fixture(t, "testdata/responses_request_transcript.json"))
	if diff := cmp.Diff(want, jsonValue(t, got.Body)); diff != "" {
		t.Errorf("request body (-want +got):\n%s", diff)
	}
}

// requestBody is the part of a Responses request body the tests read.
type requestBody struct {
	Include   []string          `json:"include"`
	Input     []json.RawMessage `json:"input"`
	Reasoning *struct {
		Effort  string `json:"effort"`
		Summary string `json:"summary"`
	} `json:"reasoning"`
	Store        *bool             `json:"store"`
	Instructions string            `json:"instructions"`
	Tools        []json.RawMessage `json:"tools"`
	Text         *struct {
		Format struct {
			Type   string          `json:"type"`
			Name   string          `json:"name"`
			Strict bool            `json:"strict"`
			Schema json.RawMessage `json:"schema"`
		} `json:"format"`
	} `json:"text"`
	PreviousResponseID *string `json:"previous_response_id"`
}

func decodeBody(t *testing.T, b []byte) requestBody {
	t.Helper()
	var body requestBody
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatalf("request body: %v\n%s", err, b)
	}
	return body
}

// A tool loop keeps the reasoning: the second request, built from the
// first response's message and the tool results, sends the reasoning item
// back with its encrypted content before the function calls it led to,
// and no reasoning that another provider wrote.
func TestResponsesToolLoopSendsReasoningBack(t *testing.T) {
	srv := providertest.NewServer(t,
		providertest.SSE(t, "testdata/responses_tool_calls.sse"),
		providertest.SSE(t, "testdata/responses_text.sse"))
	p := responsesSubject.Provider(t, srv.URL)
	earlier := keel.Message{Role: keel.RoleAssistant, Content: "Hi.", Reasoning: []keel.ReasoningPart{
		{Provider: "anthropic", Text: "greet", Signature: "EqQBCkYIARgCIkD-anthropic-sig"}}}
	req := provider.Request{
		Model:     "o-test",
		Messages:  []keel.Message{keel.UserMessage("Hello"), earlier, keel.UserMessage("Weather in Paris and Rome?")},
		Tools:     weatherTranscript().Tools,
		Reasoning: keel.Reasoning{Effort: keel.ReasoningMedium},
	}
	chunks, err := providertest.Collect(t, p.Stream(context.Background(), req))
	if err != nil {
		t.Fatal(err)
	}
	first := decodeBody(t, srv.Last().Body)
	if first.Reasoning == nil || first.Reasoning.Effort != "medium" || first.Reasoning.Summary != "auto" {
		t.Errorf("reasoning = %+v, want effort medium, summary auto", first.Reasoning)
	}
	if first.Store == nil || *first.Store || first.PreviousResponseID != nil {
		t.Errorf("store = %v, previous_response_id = %v: want store false and no previous response", first.Store, first.PreviousResponseID)
	}
	if !slices.Contains(first.Include, "reasoning.encrypted_content") {
		t.Errorf("include = %v, want reasoning.encrypted_content", first.Include)
	}
	resp, err := providertest.Assemble(chunks).Response()
	if err != nil {
		t.Fatal(err)
	}

	req.Reasoning = keel.Reasoning{} // the transcript alone asks for the encrypted content
	req.Messages = append(req.Messages, resp.Message(),
		keel.ToolResultMessage(resp.ToolCalls[0], keel.ToolOK, "18C sunny"),
		keel.ToolResultMessage(resp.ToolCalls[1], keel.ToolOK, "21C cloudy"))
	if _, err := providertest.Collect(t, p.Stream(context.Background(), req)); err != nil {
		t.Fatal(err)
	}
	second := decodeBody(t, srv.Last().Body)
	if !slices.Contains(second.Include, "reasoning.encrypted_content") {
		t.Errorf("include = %v, want reasoning.encrypted_content", second.Include)
	}
	var items []any
	for _, raw := range second.Input {
		items = append(items, jsonValue(t, raw))
	}
	want := []any{
		map[string]any{"role": "user", "content": "Hello"},
		map[string]any{"role": "assistant", "content": "Hi."},
		map[string]any{"role": "user", "content": "Weather in Paris and Rome?"},
		map[string]any{"type": "reasoning", "id": "rs_tools1", "encrypted_content": encToolCalls,
			"summary": []any{map[string]any{"type": "summary_text", "text": toolCallsReasoning.Text}}},
		map[string]any{"type": "function_call", "call_id": "call_paris", "name": "get_weather", "arguments": `{"city":"Paris"}`},
		map[string]any{"type": "function_call", "call_id": "call_rome", "name": "get_weather", "arguments": `{"city":"Rome"}`},
		map[string]any{"type": "function_call_output", "call_id": "call_paris", "output": "18C sunny"},
		map[string]any{"type": "function_call_output", "call_id": "call_rome", "output": "21C cloudy"},
	}
	if diff := cmp.Diff(want, items); diff != "" {
		t.Errorf("second request's input (-want +got):\n%s", diff)
	}
	if strings.Contains(string(srv.Last().Body), "anthropic-sig") {
		t.Error("the second request carries reasoning another provider wrote")
	}
}

// Reasoning parts that cannot be sent back are left out: one without its
// encrypted content (the server keeps nothing to look it up by), and any
// of an aborted message. Without reasoning asked for or kept, nothing is
// included.
func TestResponsesReasoningLeftOut(t *testing.T) {
	srv := providertest.NewServer(t, providertest.SSE(t, "testdata/responses_text.sse"))
	p := responsesSubject.Provider(t, srv.URL)
	call := keel.ToolCall{ID: "call_1", Name: "list_cities"}
	req := provider.Request{Model: "o-test", Messages: []keel.Message{
		keel.UserMessage("Hi"),
		{Role: keel.RoleAssistant, ToolCalls: []keel.ToolCall{call},
			Reasoning: []keel.ReasoningPart{{Provider: Name, ID: "rs_plain", Text: "no content kept"}}},
		keel.ToolResultMessage(call, keel.ToolOK, "Paris"),
		{Role: keel.RoleAssistant, Content: "Paris is", Aborted: true,
			Reasoning: []keel.ReasoningPart{{Provider: Name, ID: "rs_aborted", Signature: "gAAAA-aborted"}}},
	}}
	if _, err := providertest.Collect(t, p.Stream(context.Background(), req)); err != nil {
		t.Fatal(err)
	}
	raw := string(srv.Last().Body)
	for _, s := range []string{"rs_plain", "rs_aborted", `"type":"reasoning"`} {
		if strings.Contains(raw, s) {
			t.Errorf("request carries %s: %s", s, raw)
		}
	}
	if body := decodeBody(t, srv.Last().Body); slices.Contains(body.Include, "reasoning.encrypted_content") != true {
		t.Errorf("include = %v: openai reasoning parts in the transcript ask for the encrypted content", body.Include)
	}

	req.Messages = []keel.Message{keel.UserMessage("Hi")}
	if _, err := providertest.Collect(t, p.Stream(context.Background(), req)); err != nil {
		t.Fatal(err)
	}
	if body := decodeBody(t, srv.Last().Body); body.Include != nil || body.Reasoning != nil {
		t.Errorf("include = %v, reasoning = %v, want neither", body.Include, body.Reasoning)
	}
}

// Enabled hosted tools go with every request, before the function tools;
// web search asks for its sources.
func TestResponsesHostedToolsRequest(t *testing.T) {
	srv := providertest.NewServer(t, providertest.SSE(t, "testdata/responses_web_search.sse"))
	p, err := New(Config{BaseURL: srv.URL + "/v1", APIKey: testKey, API: APIResponses,
		HostedTools:    []string{HostedWebSearch, HostedFileSearch, HostedCodeInterpreter},
		VectorStoreIDs: []string{"vs_docs"}})
	if err != nil {
		t.Fatal(err)
	}
	req := subject.Request
	req.Tools = []keel.ToolSpec{{Name: "list_cities"}}
	for range 2 { // the hosted tools are shared, never appended to
		if _, err := providertest.Collect(t, p.Stream(context.Background(), req)); err != nil {
			t.Fatal(err)
		}
	}
	body := decodeBody(t, srv.Last().Body)
	var tools []any
	for _, raw := range body.Tools {
		tools = append(tools, jsonValue(t, raw))
	}
	want := []any{
		map[string]any{"type": "web_search"},
		map[string]any{"type": "file_search", "vector_store_ids": []any{"vs_docs"}},
		map[string]any{"type": "code_interpreter", "container": map[string]any{"type": "auto"}},
		map[string]any{"type": "function", "name": "list_cities", "strict": false,
			"parameters": map[string]any{"type": "object", "properties": map[string]any{}}},
	}
	if diff := cmp.Diff(want, tools); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	if !slices.Equal(body.Include, []string{"web_search_call.action.sources"}) {
		t.Errorf("include = %v, want the web search sources", body.Include)
	}
}

// What a hosted tool's item puts in an activity is bounded: the server's
// URLs and queries are untrusted.
func TestHostedActivityBounds(t *testing.T) {
	item := &responses.ResponseOutputItemUnion{ID: "ws_" + strings.Repeat("x", 500), Type: "web_search_call", Status: "failed"}
	item.Action.Type = "search"
	item.Action.Query = "sk-live-abcdefghijklmnop\x00 " + strings.Repeat("q", 1000)
	bad := []string{"javascript:alert(1)", "https://ok.example/a b", "https://ok.example/\x1b[31m", "/relative",
		"https://ok.example/" + strings.Repeat("p", maxHostedURLLen), "ftp://files.example/x"}
	good := map[string]bool{}
	for i := range 2 * maxHostedURLs {
		u := "https://ok.example/" + strings.Repeat("p", i)
		good[u] = true
		bad = append(bad, u, u) // each twice
	}
	for _, u := range bad {
		item.Action.Sources = append(item.Action.Sources, responses.ResponseFunctionWebSearchActionSearchSource{URL: u})
	}
	h := hostedActivity(item)
	if len(h.URLs) != maxHostedURLs {
		t.Errorf("%d URLs, want %d", len(h.URLs), maxHostedURLs)
	}
	for i, u := range h.URLs {
		if !good[u] || slices.Contains(h.URLs[:i], u) {
			t.Errorf("URL %q kept", u)
		}
	}
	if n := len([]rune(h.Query)); n > maxHostedQueryLen || strings.Contains(h.Query, "abcdefghijklmnop") || strings.ContainsRune(h.Query, 0) {
		t.Errorf("query %q (%d runes): want at most %d, sanitized", h.Query, n, maxHostedQueryLen)
	}
	if n := len([]rune(h.ID)); n > maxHostedIDLen {
		t.Errorf("ID of %d runes", n)
	}
	if h.Detail != "searched the web (failed)" {
		t.Errorf("detail = %q", h.Detail)
	}

	code := &responses.ResponseOutputItemUnion{ID: "ci_1", Type: "code_interpreter_call", Status: "completed",
		Code: "\n  " + strings.Repeat("x = 1; ", 100) + "\nprint(x)"}
	if d := hostedActivity(code).Detail; len([]rune(d)) > maxHostedDetailLen || !strings.HasPrefix(d, "ran code: x = 1;") {
		t.Errorf("code detail = %q", d)
	}
}

// docs/contract.md §21.1 on the Responses API: an object schema goes as
// text.format json_schema, not strict; any other schema is asked for in
// the instructions.
func TestResponsesOutputSchemaRequest(t *testing.T) {
	object := json.RawMessage(`{"type":"object","required":["facts"],"properties":{"facts":{"type":"array"}}}`)
	srv := providertest.NewServer(t, providertest.SSE(t, "testdata/responses_text.sse"))
	p := responsesSubject.Provider(t, srv.URL)
	req := subject.Request
	req.OutputSchema = object
	if _, err := providertest.Collect(t, p.Stream(context.Background(), req)); err != nil {
		t.Fatal(err)
	}
	body := decodeBody(t, srv.Last().Body)
	if body.Text == nil || body.Text.Format.Type != "json_schema" || body.Text.Format.Name != "answer" || body.Text.Format.Strict {
		t.Fatalf("text = %+v, want format json_schema named answer, not strict", body.Text)
	}
	var sent, want any
	_ = json.Unmarshal(body.Text.Format.Schema, &sent)
	_ = json.Unmarshal(object, &want)
	if !jsonEqual(sent, want) {
		t.Errorf("schema sent %s, want %s", body.Text.Format.Schema, object)
	}
	if body.Instructions != "" {
		t.Errorf("a native schema adds no instructions: %q", body.Instructions)
	}

	req.System = "Be brief."
	req.OutputSchema = json.RawMessage(`{"type":"array","items":{"type":"string"}}`)
	if _, err := providertest.Collect(t, p.Stream(context.Background(), req)); err != nil {
		t.Fatal(err)
	}
	body = decodeBody(t, srv.Last().Body)
	if body.Text != nil {
		t.Errorf("a non-object schema is not sent as text.format: %+v", body.Text)
	}
	if !strings.HasPrefix(body.Instructions, "Be brief.\n\n") || !strings.Contains(body.Instructions, "matching this JSON Schema") {
		t.Errorf("instructions = %q, want the system prompt and the answer instruction", body.Instructions)
	}
}
