package openai

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/provider"
)

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
	srv := newServer(t, sseFixture(t, "text.sse"))
	_, err := collect(t, newProvider(t, srv.URL).Stream(context.Background(), weatherTranscript()))
	if err != nil {
		t.Fatal(err)
	}
	got := srv.lastRequest()
	if got.Method != http.MethodPost || got.Path != "/v1/chat/completions" {
		t.Errorf("request %s %s, want POST /v1/chat/completions", got.Method, got.Path)
	}
	if ct := got.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	want := jsonValue(t, fixture(t, "request_transcript.json"))
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
			srv := newServer(t, sseFixture(t, "text.sse"))
			tt.cfg.BaseURL = srv.URL + "/v1"
			p, err := New(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			req := simpleRequest
			req.MaxTokens = tt.reqMax
			if _, err := collect(t, p.Stream(context.Background(), req)); err != nil {
				t.Fatal(err)
			}
			body := jsonValue(t, srv.lastRequest().Body).(map[string]any)
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
	srv := newServer(t, errorFixture(t, http.StatusUnauthorized, nil, "error_401.json"))
	_, err := collect(t, newProvider(t, srv.URL).Stream(context.Background(), weatherTranscript()))
	var pe *keel.ProviderError
	if !errors.As(err, &pe) || pe.Kind != keel.ProviderAuth {
		t.Fatalf("error = %v, want auth ProviderError", err)
	}
	req := srv.lastRequest()
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
	if contains(req.Body, testKey) || strings.Contains(req.Path+req.RawQuery, testKey) {
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
	srv := newServer(t, sseFixture(t, "text.sse"))
	p, err := New(Config{BaseURL: srv.URL + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := collect(t, p.Stream(context.Background(), simpleRequest)); err != nil {
		t.Fatal(err)
	}
	req := srv.lastRequest()
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

func TestHTTPErrors(t *testing.T) {
	soon := time.Now().Add(30 * time.Second).UTC().Format(http.TimeFormat)
	tests := []struct {
		name      string
		status    int
		header    http.Header
		fixture   string
		wantKind  keel.ProviderErrorKind
		retryable bool
		// Retry-After window; both zero means none.
		minWait, maxWait time.Duration
		wantMsg          string
	}{
		{name: "400", status: 400, fixture: "error_400.json", wantKind: keel.ProviderInvalidRequest, wantMsg: "'robot' is not one of"},
		{name: "401", status: 401, fixture: "error_401.json", wantKind: keel.ProviderAuth, wantMsg: "Incorrect API key provided: sk-[redacted]"},
		{name: "404 model", status: 404, fixture: "error_404_model.json", wantKind: keel.ProviderUnknownModel, wantMsg: "gpt-nope"},
		{name: "404 ollama", status: 404, fixture: "error_404_ollama.json", wantKind: keel.ProviderInvalidRequest, wantMsg: `model "llama9" not found`},
		{name: "429 seconds", status: 429, header: http.Header{"Retry-After": {"20"}}, fixture: "error_429.json",
			wantKind: keel.ProviderRateLimited, retryable: true, minWait: 20 * time.Second, maxWait: 20 * time.Second, wantMsg: "Rate limit reached"},
		{name: "429 date", status: 429, header: http.Header{"Retry-After": {soon}}, fixture: "error_429.json",
			wantKind: keel.ProviderRateLimited, retryable: true, minWait: 27 * time.Second, maxWait: 30 * time.Second},
		{name: "429 ms", status: 429, header: http.Header{"Retry-After-Ms": {"1200"}, "Retry-After": {"2"}}, fixture: "error_429.json",
			wantKind: keel.ProviderRateLimited, retryable: true, minWait: 1200 * time.Millisecond, maxWait: 1200 * time.Millisecond},
		{name: "500", status: 500, fixture: "error_500.json", wantKind: keel.ProviderServer, retryable: true, wantMsg: "The server had an error"},
		{name: "502 html", status: 502, header: http.Header{"Content-Type": {"text/html"}}, fixture: "error_502.html", wantKind: keel.ProviderServer, retryable: true, wantMsg: "502 Bad Gateway"},
		{name: "503", status: 503, header: http.Header{"Retry-After": {"5"}}, fixture: "error_503.json",
			wantKind: keel.ProviderOverloaded, retryable: true, minWait: 5 * time.Second, maxWait: 5 * time.Second, wantMsg: "overloaded"},
		{name: "529", status: 529, fixture: "error_529.json", wantKind: keel.ProviderOverloaded, retryable: true, wantMsg: "Overloaded"},
		{name: "empty 500", status: 500, wantKind: keel.ProviderServer, retryable: true, wantMsg: "Internal Server Error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, errorFixture(t, tt.status, tt.header, tt.fixture))
			chunks, err := collect(t, newProvider(t, srv.URL).Stream(context.Background(), simpleRequest))
			if len(chunks) != 0 {
				t.Errorf("got chunks %+v before the error", chunks)
			}
			var pe *keel.ProviderError
			if !errors.As(err, &pe) {
				t.Fatalf("error = %T %v, want *keel.ProviderError", err, err)
			}
			got := [4]any{pe.Provider, pe.Kind, pe.Status, pe.Retryable}
			if diff := cmp.Diff([4]any{"openai", tt.wantKind, tt.status, tt.retryable}, got); diff != "" {
				t.Errorf("provider, kind, status, retryable (-want +got):\n%s", diff)
			}
			if wait := pe.RetryAfter.Std(); wait < tt.minWait || wait > tt.maxWait {
				t.Errorf("RetryAfter = %v, want in [%v, %v]", wait, tt.minWait, tt.maxWait)
			}
			if !strings.Contains(pe.Message, tt.wantMsg) {
				t.Errorf("message %q does not contain %q", pe.Message, tt.wantMsg)
			}
			// SDK retries are off: one physical request, whatever the status.
			if n := srv.requests.Load(); n != 1 {
				t.Errorf("server saw %d requests, want exactly 1", n)
			}
		})
	}
}

func TestConnectionRefused(t *testing.T) {
	srv := newServer(t, sseFixture(t, "text.sse"))
	url := srv.URL
	srv.Close()
	_, err := collect(t, newProvider(t, url).Stream(context.Background(), simpleRequest))
	var pe *keel.ProviderError
	if !errors.As(err, &pe) || pe.Kind != keel.ProviderConnection || !pe.Retryable {
		t.Fatalf("error = %v, want retryable connection ProviderError", err)
	}
}

// Stopping early (yield returns false) releases the connection at once.
func TestEarlyStopClosesBody(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	srv := newServer(t, blockAfterFirst(release))
	rec := &closeRecorder{}
	p, err := New(Config{BaseURL: srv.URL + "/v1", HTTPClient: &http.Client{Transport: rec}})
	if err != nil {
		t.Fatal(err)
	}
	var got []provider.Chunk
	for c, err := range p.Stream(context.Background(), simpleRequest) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, c)
		break
	}
	if diff := cmp.Diff([]provider.Chunk{{Text: "first"}}, got); diff != "" {
		t.Errorf("chunks (-want +got):\n%s", diff)
	}
	if !rec.closed.Load() {
		t.Error("response body still open after the consumer stopped")
	}
}

// Cancelling the caller's context ends the stream with the context's own
// error, unclassified, so the runtime sees a cancellation.
func TestCancelMidStream(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	srv := newServer(t, blockAfterFirst(release))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var chunks []provider.Chunk
	var failure error
	for c, err := range newProvider(t, srv.URL).Stream(ctx, simpleRequest) {
		if err != nil {
			failure = err
			continue
		}
		chunks = append(chunks, c)
		cancel() // after the first chunk
	}
	if !errors.Is(failure, context.Canceled) {
		t.Fatalf("error = %v, want context.Canceled", failure)
	}
	var pe *keel.ProviderError
	if errors.As(failure, &pe) {
		t.Errorf("cancellation was classified as %v", pe)
	}
	if len(chunks) != 1 {
		t.Errorf("got %d chunks, want 1", len(chunks))
	}
}

func TestRequestErrorsArePermanent(t *testing.T) {
	srv := newServer(t, sseFixture(t, "text.sse"))
	p := newProvider(t, srv.URL)
	tests := []struct {
		name string
		req  provider.Request
		kind keel.ProviderErrorKind
	}{
		{"no model", provider.Request{Messages: simpleRequest.Messages}, keel.ProviderUnknownModel},
		{"bad role", provider.Request{Model: "m", Messages: []keel.Message{{Role: "robot", Content: "x"}}}, keel.ProviderInvalidRequest},
		{"bad schema", provider.Request{Model: "m", Messages: simpleRequest.Messages,
			Tools: []keel.ToolSpec{{Name: "t", Parameters: json.RawMessage(`[1,2]`)}}}, keel.ProviderInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := collect(t, p.Stream(context.Background(), tt.req))
			var pe *keel.ProviderError
			if !errors.As(err, &pe) || pe.Kind != tt.kind || pe.Retryable {
				t.Fatalf("error = %v, want permanent %s", err, tt.kind)
			}
		})
	}
	if n := srv.requests.Load(); n != 0 {
		t.Errorf("server saw %d requests for requests that cannot be built", n)
	}
}

// A server that ignores "stream" and answers with one JSON document.
func TestNotStreamed(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`))
	})
	_, err := collect(t, newProvider(t, srv.URL).Stream(context.Background(), simpleRequest))
	var pe *keel.ProviderError
	if !errors.As(err, &pe) || pe.Kind != keel.ProviderInvalidRequest || pe.Retryable {
		t.Fatalf("error = %v, want permanent invalid_request", err)
	}
}
