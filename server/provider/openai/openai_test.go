package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/provider"
	"github.com/keelrun/keel/server/provider/providertest"
)

const testKey = "sk-test-SECRET-1234567890"

// subject is the OpenAI backend, for the shared checks and the tests here.
// Its base URL ends in /v1, as OpenAI-compatible servers' URLs do.
var subject = providertest.Subject{
	Name: Name,
	New: func(baseURL string, client *http.Client) (provider.Provider, error) {
		return New(Config{BaseURL: baseURL + "/v1", APIKey: testKey, HTTPClient: client})
	},
	Request:    provider.Request{Model: "gpt-test", Messages: []keel.Message{keel.UserMessage("Say hello")}},
	FirstEvent: `data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"first"},"finish_reason":null}]}` + "\n\n",
}

func TestNewConfig(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr error
	}{
		{"openai with key", Config{APIKey: "sk-x"}, nil},
		{"openai without key", Config{}, ErrNoAPIKey},
		{"remote without key", Config{BaseURL: "https://api.together.xyz/v1"}, ErrNoAPIKey},
		{"ollama", Config{BaseURL: "http://localhost:11434/v1"}, nil},
		{"loopback ip", Config{BaseURL: "http://127.0.0.1:8000/v1"}, nil},
		{"ipv6 loopback", Config{BaseURL: "http://[::1]:8080/v1"}, nil},
		{"private lan", Config{BaseURL: "http://192.168.1.20:8000/v1"}, nil},
		{"compose service", Config{BaseURL: "http://vllm:8000/v1"}, nil},
		{"docker host", Config{BaseURL: "http://host.docker.internal:11434/v1"}, nil},
		{"no scheme", Config{BaseURL: "localhost:11434/v1"}, ErrBadBaseURL},
		{"wrong scheme", Config{BaseURL: "ftp://localhost/v1", APIKey: "k"}, ErrBadBaseURL},
		{"chat", Config{APIKey: "k", API: APIChat}, nil},
		{"responses", Config{APIKey: "k", API: APIResponses}, nil},
		{"unknown api", Config{APIKey: "k", API: "completions"}, ErrBadAPI},
		{"hosted tools", Config{APIKey: "k", API: APIResponses,
			HostedTools: []string{HostedWebSearch, HostedCodeInterpreter, HostedWebSearch}}, nil},
		{"file search", Config{APIKey: "k", API: APIResponses, HostedTools: []string{HostedFileSearch},
			VectorStoreIDs: []string{"vs_1"}}, nil},
		{"file search without stores", Config{APIKey: "k", API: APIResponses,
			HostedTools: []string{HostedFileSearch}}, ErrNoVectorStores},
		{"unknown hosted tool", Config{APIKey: "k", API: APIResponses, HostedTools: []string{"image_generation"}}, ErrBadHostedTool},
		{"hosted tool on chat", Config{APIKey: "k", HostedTools: []string{HostedWebSearch}}, ErrHostedToolsNeedResponses},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(tt.cfg)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("New error = %v, want %v", err, tt.wantErr)
			}
			if err == nil && p.Name() != "openai" {
				t.Errorf("Name() = %q", p.Name())
			}
		})
	}
}

func TestFromEnv(t *testing.T) {
	t.Setenv(EnvBaseURL, "http://localhost:11434/v1")
	t.Setenv(EnvAPIKey, "sk-from-env")
	want := Config{BaseURL: "http://localhost:11434/v1", APIKey: "sk-from-env"}
	if diff := cmp.Diff(want, FromEnv(), cmp.AllowUnexported(http.Client{})); diff != "" {
		t.Errorf("FromEnv (-want +got):\n%s", diff)
	}
}

func weatherTranscript() provider.Request {
	paris := keel.ToolCall{ID: "call_1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}
	rome := keel.ToolCall{ID: "call_2", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Rome"}`)}
	lost := keel.ToolCall{ID: "call_lost", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Ro`)}
	list := keel.ToolCall{ID: "call_3", Name: "list_cities"}
	return provider.Request{
		Model:  "gpt-test",
		System: "You are terse.",
		Messages: []keel.Message{
			keel.UserMessage("Weather in Paris and Rome?"),
			{Role: keel.RoleAssistant, Content: "Checking both.", ToolCalls: []keel.ToolCall{paris, rome}},
			keel.ToolResultMessage(paris, keel.ToolOK, "18C sunny"),
			keel.ToolResultMessage(rome, keel.ToolError, "error: station offline"),
			{Role: keel.RoleAssistant, Content: "Paris is sunny; Rome", ToolCalls: []keel.ToolCall{lost}, Aborted: true},
			keel.ToolResultMessage(lost, keel.ToolInterrupted, "interrupted"),
			{Role: keel.RoleUser, Content: "Just Paris then.", SteeringID: "st-1"},
			{Role: keel.RoleAssistant, ToolCalls: []keel.ToolCall{list}},
			keel.ToolResultMessage(list, keel.ToolOK, ""),
		},
		Tools: []keel.ToolSpec{
			{Name: "get_weather", Description: "Current weather for a city.",
				Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`)},
			{Name: "list_cities"},
		},
		MaxTokens: 256,
	}
}

func jsonValue(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	return v
}

func TestRequestBody(t *testing.T) {
	srv := providertest.NewServer(t, providertest.SSE(t, "testdata/text.sse"))
	_, err := providertest.Collect(t, subject.Provider(t, srv.URL).Stream(context.Background(), weatherTranscript()))
	if err != nil {
		t.Fatal(err)
	}
	got := srv.Last()
	if got.Method != http.MethodPost || got.Path != "/v1/chat/completions" {
		t.Errorf("request %s %s, want POST /v1/chat/completions", got.Method, got.Path)
	}
	if ct := got.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	want := jsonValue(t, providertest.Fixture(t, "testdata/request_transcript.json"))
	if diff := cmp.Diff(want, jsonValue(t, got.Body)); diff != "" {
		t.Errorf("request body (-want +got):\n%s", diff)
	}
}

func TestRequestMaxTokens(t *testing.T) {
	tests := []struct {
		name   string
		cfg    Config
		reqMax int
		want   map[string]any // the max-token fields present
	}{
		{"none", Config{}, 0, map[string]any{}},
		{"from request", Config{MaxTokens: 100}, 50, map[string]any{"max_completion_tokens": 50.0}},
		{"config default", Config{MaxTokens: 100}, 0, map[string]any{"max_completion_tokens": 100.0}},
		{"legacy field", Config{LegacyMaxTokens: true}, 64, map[string]any{"max_tokens": 64.0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := providertest.NewServer(t, providertest.SSE(t, "testdata/text.sse"))
			tt.cfg.BaseURL = srv.URL + "/v1"
			p, err := New(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			req := subject.Request
			req.MaxTokens = tt.reqMax
			if _, err := providertest.Collect(t, p.Stream(context.Background(), req)); err != nil {
				t.Fatal(err)
			}
			body := jsonValue(t, srv.Last().Body).(map[string]any)
			got := map[string]any{}
			for _, k := range []string{"max_tokens", "max_completion_tokens"} {
				if v, ok := body[k]; ok {
					got[k] = v
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("max token fields (-want +got):\n%s", diff)
			}
		})
	}
}

// The key travels in the Authorization header and nowhere else: not in
// other headers, the URL or the body, and not in the error a 401 produces
// even when the server echoes it.
func TestAPIKeyOnlyInAuthorization(t *testing.T) {
	srv := providertest.NewServer(t, providertest.Error(t, http.StatusUnauthorized, nil, "testdata/error_401.json"))
	_, err := providertest.Collect(t, subject.Provider(t, srv.URL).Stream(context.Background(), weatherTranscript()))
	var pe *keel.ProviderError
	if !errors.As(err, &pe) || pe.Kind != keel.ProviderAuth {
		t.Fatalf("error = %v, want auth ProviderError", err)
	}
	req := srv.Last()
	for name, values := range req.Header {
		for _, v := range values {
			if strings.Contains(v, testKey) && name != "Authorization" {
				t.Errorf("header %s carries the key", name)
			}
		}
	}
	if got := req.Header.Get("Authorization"); got != "Bearer "+testKey {
		t.Errorf("Authorization = %q", got)
	}
	if bytes.Contains(req.Body, []byte(testKey)) || strings.Contains(req.Path+req.RawQuery, testKey) {
		t.Error("key found in the body or URL")
	}
	for _, s := range []string{testKey, "SECRET"} {
		if strings.Contains(err.Error(), s) {
			t.Errorf("error %q shows the key", err)
		}
	}
}

// A local server without a key gets no Authorization header, even when the
// worker's environment has OpenAI credentials for something else.
func TestNoKeyForLocalServer(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-ambient-should-not-leak")
	t.Setenv("OPENAI_ADMIN_KEY", "sk-admin-should-not-leak")
	srv := providertest.NewServer(t, providertest.SSE(t, "testdata/text.sse"))
	p, err := New(Config{BaseURL: srv.URL + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := providertest.Collect(t, p.Stream(context.Background(), subject.Request)); err != nil {
		t.Fatal(err)
	}
	req := srv.Last()
	if got := req.Header.Get("Authorization"); got != "" {
		t.Errorf("Authorization = %q, want none", got)
	}
	for name, values := range req.Header {
		for _, v := range values {
			if strings.Contains(v, "should-not-leak") {
				t.Errorf("header %s = %q leaks an ambient key", name, v)
			}
		}
	}
}

func TestHTTPErrors(t *testing.T) { providertest.CheckHTTPErrors(t, subject, httpErrors()) }

// httpErrors are the error answers both APIs must classify.
func httpErrors() []providertest.HTTPError {
	soon := time.Now().Add(30 * time.Second).UTC().Format(http.TimeFormat)
	return []providertest.HTTPError{
		{Name: "400", Status: 400, Fixture: "error_400.json", Kind: keel.ProviderInvalidRequest, Message: "'robot' is not one of"},
		{Name: "401", Status: 401, Fixture: "error_401.json", Kind: keel.ProviderAuth, Message: "Incorrect API key provided: sk-[redacted]"},
		{Name: "404 model", Status: 404, Fixture: "error_404_model.json", Kind: keel.ProviderUnknownModel, Message: "gpt-nope"},
		{Name: "404 ollama", Status: 404, Fixture: "error_404_ollama.json", Kind: keel.ProviderInvalidRequest, Message: `model "llama9" not found`},
		{Name: "429 seconds", Status: 429, Header: http.Header{"Retry-After": {"20"}}, Fixture: "error_429.json",
			Kind: keel.ProviderRateLimited, Retryable: true, MinWait: 20 * time.Second, MaxWait: 20 * time.Second, Message: "Rate limit reached"},
		{Name: "429 date", Status: 429, Header: http.Header{"Retry-After": {soon}}, Fixture: "error_429.json",
			Kind: keel.ProviderRateLimited, Retryable: true, MinWait: 27 * time.Second, MaxWait: 30 * time.Second},
		{Name: "429 ms", Status: 429, Header: http.Header{"Retry-After-Ms": {"1200"}, "Retry-After": {"2"}}, Fixture: "error_429.json",
			Kind: keel.ProviderRateLimited, Retryable: true, MinWait: 1200 * time.Millisecond, MaxWait: 1200 * time.Millisecond},
		{Name: "500", Status: 500, Fixture: "error_500.json", Kind: keel.ProviderServer, Retryable: true, Message: "The server had an error"},
		{Name: "502 html", Status: 502, Header: http.Header{"Content-Type": {"text/html"}}, Fixture: "error_502.html", Kind: keel.ProviderServer, Retryable: true, Message: "502 Bad Gateway"},
		{Name: "503", Status: 503, Header: http.Header{"Retry-After": {"5"}}, Fixture: "error_503.json",
			Kind: keel.ProviderOverloaded, Retryable: true, MinWait: 5 * time.Second, MaxWait: 5 * time.Second, Message: "overloaded"},
		{Name: "529", Status: 529, Fixture: "error_529.json", Kind: keel.ProviderOverloaded, Retryable: true, Message: "Overloaded"},
		{Name: "empty 500", Status: 500, Kind: keel.ProviderServer, Retryable: true, Message: "Internal Server Error"},
	}
}

func TestConnectionRefused(t *testing.T) { providertest.CheckConnectionRefused(t, subject) }

// Stopping early (yield returns false) releases the connection at once.
func TestEarlyStopClosesBody(t *testing.T) { providertest.CheckEarlyStopClosesBody(t, subject) }

// Cancelling the caller's context ends the stream with the context's own
// error, unclassified, so the runtime sees a cancellation.
func TestCancelMidStream(t *testing.T) { providertest.CheckCancelMidStream(t, subject) }

func TestRequestErrorsArePermanent(t *testing.T) {
	providertest.CheckBadRequests(t, subject, []providertest.BadRequest{
		{Name: "no model", Request: provider.Request{Messages: subject.Request.Messages}, Kind: keel.ProviderUnknownModel},
		{Name: "bad role", Request: provider.Request{Model: "m", Messages: []keel.Message{{Role: "robot", Content: "x"}}}, Kind: keel.ProviderInvalidRequest},
		{Name: "bad schema", Request: provider.Request{Model: "m", Messages: subject.Request.Messages,
			Tools: []keel.ToolSpec{{Name: "t", Parameters: json.RawMessage(`[1,2]`)}}}, Kind: keel.ProviderInvalidRequest},
		{Name: "reasoning budget", Request: provider.Request{Model: "m", Messages: subject.Request.Messages,
			Reasoning: keel.Reasoning{BudgetTokens: 4096}}, Kind: keel.ProviderInvalidRequest},
	})
}

// Chat Completions takes an effort as reasoning_effort; a budget is
// refused before sending (TestRequestErrorsArePermanent).
func TestChatReasoningEffort(t *testing.T) {
	srv := providertest.NewServer(t, providertest.SSE(t, "testdata/text.sse"))
	req := subject.Request
	req.Reasoning = keel.Reasoning{Effort: keel.ReasoningHigh}
	if _, err := providertest.Collect(t, subject.Provider(t, srv.URL).Stream(context.Background(), req)); err != nil {
		t.Fatal(err)
	}
	body := jsonValue(t, srv.Last().Body).(map[string]any)
	if got := body["reasoning_effort"]; got != "high" {
		t.Errorf("reasoning_effort = %v, want high", got)
	}
	if _, err := providertest.Collect(t, subject.Provider(t, srv.URL).Stream(context.Background(), subject.Request)); err != nil {
		t.Fatal(err)
	}
	if _, ok := jsonValue(t, srv.Last().Body).(map[string]any)["reasoning_effort"]; ok {
		t.Error("reasoning_effort sent when no reasoning was asked for")
	}
}

func TestCheckReasoning(t *testing.T) {
	for _, api := range []string{APIChat, APIResponses} {
		p, err := New(Config{APIKey: "k", API: api})
		if err != nil {
			t.Fatal(err)
		}
		if err := provider.CheckReasoning(p, "gpt-test", keel.Reasoning{Effort: keel.ReasoningMinimal}); err != nil {
			t.Errorf("%s: effort refused: %v", api, err)
		}
		err = provider.CheckReasoning(p, "gpt-test", keel.Reasoning{BudgetTokens: 2048})
		var ke *keel.Error
		if !errors.As(err, &ke) || ke.Code != keel.CodeInvalidInput || !strings.Contains(ke.Message, "effort") {
			t.Errorf("%s: budget: error = %v, want invalid input naming the effort", api, err)
		}
	}
}

// A server that ignores "stream" and answers with one JSON document.
func TestNotStreamed(t *testing.T) {
	srv := providertest.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`))
	})
	_, err := providertest.Collect(t, subject.Provider(t, srv.URL).Stream(context.Background(), subject.Request))
	var pe *keel.ProviderError
	if !errors.As(err, &pe) || pe.Kind != keel.ProviderInvalidRequest || pe.Retryable {
		t.Fatalf("error = %v, want permanent invalid_request", err)
	}
}

// A server that echoes a key in a form no pattern knows (an Azure
// subscription key) still never gets it into the error: the provider
// redacts its own key by value.
func TestEchoedKeyOfAnyFormRedacted(t *testing.T) {
	const key = "3f9a1c0b7e2d4a6f8b1c3e5d7f9a0b2c"
	srv := providertest.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":{"code":"401","message":"Access denied due to invalid subscription key ` + key + `."}}`))
	})
	p, err := New(Config{BaseURL: srv.URL + "/v1", APIKey: key})
	if err != nil {
		t.Fatal(err)
	}
	_, err = providertest.Collect(t, p.Stream(context.Background(), subject.Request))
	var pe *keel.ProviderError
	if !errors.As(err, &pe) || pe.Kind != keel.ProviderAuth || strings.Contains(err.Error(), key) ||
		!strings.Contains(pe.Message, "invalid subscription key [redacted]") {
		t.Fatalf("error = %v, want an auth error with the key redacted", err)
	}
}

// A key problem is auth whatever the body's type says: OpenAI answers a
// wrong key with 401, type "invalid_request_error" and code
// "invalid_api_key", and a key that lacks a scope with 403 and the same
// type; a proxy that has begun the stream reports the wrong key as an error
// event. The message names the code, which agrees with the kind, rather
// than the type, which contradicts it.
func TestKeyProblemsAreAuth(t *testing.T) {
	providertest.CheckHTTPErrors(t, subject, []providertest.HTTPError{
		{Name: "401 invalid_api_key", Status: 401, Fixture: "error_401.json", Kind: keel.ProviderAuth, Message: "(invalid_api_key)"},
		{Name: "403 missing scope", Status: 403, Fixture: "error_403_scope.json", Kind: keel.ProviderAuth, Message: "Missing scopes"},
	})
	providertest.CheckStreamFailures(t, subject, []providertest.StreamFailure{
		{Fixture: "stream_error_key.sse", Kind: keel.ProviderAuth, Message: "Incorrect API key provided: sk-[redacted]"},
	})
	srv := providertest.NewServer(t, providertest.Error(t, http.StatusUnauthorized, nil, "testdata/error_401.json"))
	_, err := providertest.Collect(t, subject.Provider(t, srv.URL).Stream(context.Background(), subject.Request))
	if err == nil || strings.Contains(err.Error(), "invalid_request") {
		t.Errorf("error = %v, want no word of invalid_request in an auth failure", err)
	}
}
