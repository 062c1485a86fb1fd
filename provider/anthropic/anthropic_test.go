package anthropic

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
		{"with key", Config{APIKey: "sk-ant-x"}, nil},
		{"without key", Config{}, ErrNoAPIKey},
		{"local proxy without key", Config{BaseURL: "http://localhost:4000"}, nil},
		{"bad url", Config{BaseURL: "api.anthropic.com", APIKey: "k"}, ErrBadBaseURL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(tt.cfg)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("New error = %v, want %v", err, tt.wantErr)
			}
			if err == nil && (p.Name() != "anthropic" || p.cfg.MaxTokens != DefaultMaxTokens) {
				t.Errorf("Name() = %q, MaxTokens = %d", p.Name(), p.cfg.MaxTokens)
			}
		})
	}
}

func TestFromEnv(t *testing.T) {
	t.Setenv(EnvBaseURL, "https://proxy.example.com")
	t.Setenv(EnvAPIKey, "sk-ant-from-env")
	want := Config{BaseURL: "https://proxy.example.com", APIKey: "sk-ant-from-env"}
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
		Model:  "claude-test",
		System: "You are terse.",
		Messages: []keel.Message{
			keel.UserMessage("Weather in Paris and Rome?"),
			{Role: keel.RoleAssistant, Content: "Checking both.", ToolCalls: []keel.ToolCall{paris, rome}},
			keel.ToolResultMessage(paris, keel.ToolOK, "18C sunny"),
			keel.ToolResultMessage(rome, keel.ToolError, "error: station offline"),
			{Role: keel.RoleAssistant, Content: "Paris is sunny; Rome", ToolCalls: []keel.ToolCall{lost}, Aborted: true},
			keel.ToolResultMessage(lost, keel.ToolInterrupted, "interrupted"),
			keel.UserMessage("Just Paris then."),
			{Role: keel.RoleAssistant, ToolCalls: []keel.ToolCall{list}},
			keel.ToolResultMessage(list, keel.ToolOK, ""),
			{Role: keel.RoleUser, Content: "And Rome?", SteeringID: "st-1"},
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
	if _, err := collect(t, newProvider(t, srv.URL).Stream(context.Background(), weatherTranscript())); err != nil {
		t.Fatal(err)
	}
	got := srv.lastRequest()
	if got.Method != http.MethodPost || got.Path != "/v1/messages" {
		t.Errorf("request %s %s, want POST /v1/messages", got.Method, got.Path)
	}
	if v := got.Header.Get("Anthropic-Version"); v == "" {
		t.Error("no anthropic-version header")
	}
	want := jsonValue(t, fixture(t, "request_transcript.json"))
	if diff := cmp.Diff(want, jsonValue(t, got.Body)); diff != "" {
		t.Errorf("request body (-want +got):\n%s", diff)
	}
}

func TestRequestMaxTokens(t *testing.T) {
	tests := []struct {
		name   string
		cfg    int
		reqMax int
		want   float64
	}{
		{"default", 0, 0, DefaultMaxTokens},
		{"config", 1000, 0, 1000},
		{"request wins", 1000, 50, 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, sseFixture(t, "text.sse"))
			p, err := New(Config{BaseURL: srv.URL, APIKey: testKey, MaxTokens: tt.cfg})
			if err != nil {
				t.Fatal(err)
			}
			req := simpleRequest
			req.MaxTokens = tt.reqMax
			if _, err := collect(t, p.Stream(context.Background(), req)); err != nil {
				t.Fatal(err)
			}
			body := jsonValue(t, srv.lastRequest().Body).(map[string]any)
			if body["max_tokens"] != tt.want {
				t.Errorf("max_tokens = %v, want %v", body["max_tokens"], tt.want)
			}
		})
	}
}

// The key travels in the x-api-key header and nowhere else, and a 401 that
// echoes it does not carry it into the error.
func TestAPIKeyOnlyInHeader(t *testing.T) {
	t.Setenv("ANTHROPIC_AUTH_TOKEN", "ambient-token-should-not-leak")
	srv := newServer(t, errorFixture(t, http.StatusUnauthorized, nil, "error_401.json"))
	_, err := collect(t, newProvider(t, srv.URL).Stream(context.Background(), weatherTranscript()))
	var pe *keel.ProviderError
	if !errors.As(err, &pe) || pe.Kind != keel.ProviderAuth || pe.Retryable {
		t.Fatalf("error = %v, want permanent auth ProviderError", err)
	}
	req := srv.lastRequest()
	if got := req.Header.Get("X-Api-Key"); got != testKey {
		t.Errorf("x-api-key = %q", got)
	}
	for name, values := range req.Header {
		for _, v := range values {
			if strings.Contains(v, testKey) && name != "X-Api-Key" {
				t.Errorf("header %s carries the key", name)
			}
			if strings.Contains(v, "should-not-leak") {
				t.Errorf("header %s = %q leaks an ambient credential", name, v)
			}
		}
	}
	if contains(req.Body, testKey) || strings.Contains(req.Path+req.RawQuery, testKey) {
		t.Error("key found in the body or URL")
	}
	if strings.Contains(err.Error(), "SECRET") {
		t.Errorf("error %q shows the key", err)
	}
}

func TestHTTPErrors(t *testing.T) {
	soon := time.Now().Add(30 * time.Second).UTC().Format(http.TimeFormat)
	tests := []struct {
		name             string
		status           int
		header           http.Header
		fixture          string
		wantKind         keel.ProviderErrorKind
		retryable        bool
		minWait, maxWait time.Duration
		wantMsg          string
	}{
		{name: "400", status: 400, fixture: "error_400.json", wantKind: keel.ProviderInvalidRequest, wantMsg: "max_tokens: Field required"},
		{name: "401", status: 401, fixture: "error_401.json", wantKind: keel.ProviderAuth, wantMsg: "invalid x-api-key"},
		{name: "403", status: 403, wantKind: keel.ProviderAuth},
		{name: "404 model", status: 404, fixture: "error_404.json", wantKind: keel.ProviderUnknownModel, wantMsg: "claude-nope"},
		{name: "429 seconds", status: 429, header: http.Header{"Retry-After": {"12"}}, fixture: "error_429.json",
			wantKind: keel.ProviderRateLimited, retryable: true, minWait: 12 * time.Second, maxWait: 12 * time.Second, wantMsg: "rate limit"},
		{name: "429 date", status: 429, header: http.Header{"Retry-After": {soon}}, fixture: "error_429.json",
			wantKind: keel.ProviderRateLimited, retryable: true, minWait: 27 * time.Second, maxWait: 30 * time.Second},
		{name: "500", status: 500, fixture: "error_500.json", wantKind: keel.ProviderServer, retryable: true, wantMsg: "Internal server error"},
		{name: "503 plain text", status: 503, header: http.Header{"Content-Type": {"text/plain"}}, fixture: "error_503.json",
			wantKind: keel.ProviderOverloaded, retryable: true, wantMsg: "upstream connect error"},
		{name: "529", status: 529, header: http.Header{"Retry-After": {"3"}}, fixture: "error_529.json",
			wantKind: keel.ProviderOverloaded, retryable: true, minWait: 3 * time.Second, maxWait: 3 * time.Second, wantMsg: "Overloaded"},
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
			if diff := cmp.Diff([4]any{"anthropic", tt.wantKind, tt.status, tt.retryable}, got); diff != "" {
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
	p, err := New(Config{BaseURL: srv.URL, APIKey: testKey, HTTPClient: &http.Client{Transport: rec}})
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
// error, unclassified.
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
		cancel()
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
			Tools: []keel.ToolSpec{{Name: "t", Parameters: json.RawMessage(`"string"`)}}}, keel.ProviderInvalidRequest},
		{"bad arguments", provider.Request{Model: "m", Messages: []keel.Message{
			{Role: keel.RoleAssistant, ToolCalls: []keel.ToolCall{{ID: "c", Name: "t", Arguments: json.RawMessage(`{"a":`)}}}}},
			keel.ProviderInvalidRequest},
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
