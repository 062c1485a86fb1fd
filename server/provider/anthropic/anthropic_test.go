package anthropic

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

const testKey = "sk-ant-test-SECRET-abcdef123456"

// subject is the Anthropic backend, for the shared checks and the tests.
var subject = providertest.Subject{
	Name: Name,
	New: func(baseURL string, client *http.Client) (provider.Provider, error) {
		return New(Config{BaseURL: baseURL, APIKey: testKey, HTTPClient: client})
	},
	Request: provider.Request{Model: "claude-test", Messages: []keel.Message{keel.UserMessage("Say hello")}},
	FirstEvent: "event: content_block_delta\n" +
		`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"first"}}` + "\n\n",
}

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
	srv := providertest.NewServer(t, providertest.SSE(t, "testdata/text.sse"))
	if _, err := providertest.Collect(t, subject.Provider(t, srv.URL).Stream(context.Background(), weatherTranscript())); err != nil {
		t.Fatal(err)
	}
	got := srv.Last()
	if got.Method != http.MethodPost || got.Path != "/v1/messages" {
		t.Errorf("request %s %s, want POST /v1/messages", got.Method, got.Path)
	}
	if v := got.Header.Get("Anthropic-Version"); v == "" {
		t.Error("no anthropic-version header")
	}
	want := jsonValue(t, providertest.Fixture(t, "testdata/request_transcript.json"))
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
			srv := providertest.NewServer(t, providertest.SSE(t, "testdata/text.sse"))
			p, err := New(Config{BaseURL: srv.URL, APIKey: testKey, MaxTokens: tt.cfg})
			if err != nil {
				t.Fatal(err)
			}
			req := subject.Request
			req.MaxTokens = tt.reqMax
			if _, err := providertest.Collect(t, p.Stream(context.Background(), req)); err != nil {
				t.Fatal(err)
			}
			body := jsonValue(t, srv.Last().Body).(map[string]any)
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
	srv := providertest.NewServer(t, providertest.Error(t, http.StatusUnauthorized, nil, "testdata/error_401.json"))
	_, err := providertest.Collect(t, subject.Provider(t, srv.URL).Stream(context.Background(), weatherTranscript()))
	var pe *keel.ProviderError
	if !errors.As(err, &pe) || pe.Kind != keel.ProviderAuth || pe.Retryable {
		t.Fatalf("error = %v, want permanent auth ProviderError", err)
	}
	req := srv.Last()
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
	if bytes.Contains(req.Body, []byte(testKey)) || strings.Contains(req.Path+req.RawQuery, testKey) {
		t.Error("key found in the body or URL")
	}
	if strings.Contains(err.Error(), "SECRET") {
		t.Errorf("error %q shows the key", err)
	}
}

func TestHTTPErrors(t *testing.T) {
	soon := time.Now().Add(30 * time.Second).UTC().Format(http.TimeFormat)
	providertest.CheckHTTPErrors(t, subject, []providertest.HTTPError{
		{Name: "400", Status: 400, Fixture: "error_400.json", Kind: keel.ProviderInvalidRequest, Message: "max_tokens: Field required"},
		{Name: "401", Status: 401, Fixture: "error_401.json", Kind: keel.ProviderAuth, Message: "invalid x-api-key"},
		{Name: "403", Status: 403, Kind: keel.ProviderAuth},
		{Name: "404 model", Status: 404, Fixture: "error_404.json", Kind: keel.ProviderUnknownModel, Message: "claude-nope"},
		{Name: "429 seconds", Status: 429, Header: http.Header{"Retry-After": {"12"}}, Fixture: "error_429.json",
			Kind: keel.ProviderRateLimited, Retryable: true, MinWait: 12 * time.Second, MaxWait: 12 * time.Second, Message: "rate limit"},
		{Name: "429 date", Status: 429, Header: http.Header{"Retry-After": {soon}}, Fixture: "error_429.json",
			Kind: keel.ProviderRateLimited, Retryable: true, MinWait: 27 * time.Second, MaxWait: 30 * time.Second},
		{Name: "500", Status: 500, Fixture: "error_500.json", Kind: keel.ProviderServer, Retryable: true, Message: "Internal server error"},
		{Name: "503 plain text", Status: 503, Header: http.Header{"Content-Type": {"text/plain"}}, Fixture: "error_503.json",
			Kind: keel.ProviderOverloaded, Retryable: true, Message: "upstream connect error"},
		{Name: "529", Status: 529, Header: http.Header{"Retry-After": {"3"}}, Fixture: "error_529.json",
			Kind: keel.ProviderOverloaded, Retryable: true, MinWait: 3 * time.Second, MaxWait: 3 * time.Second, Message: "Overloaded"},
	})
}

func TestConnectionRefused(t *testing.T) { providertest.CheckConnectionRefused(t, subject) }

// Stopping early (yield returns false) releases the connection at once.
func TestEarlyStopClosesBody(t *testing.T) { providertest.CheckEarlyStopClosesBody(t, subject) }

// Cancelling the caller's context ends the stream with the context's own
// error, unclassified.
func TestCancelMidStream(t *testing.T) { providertest.CheckCancelMidStream(t, subject) }

func TestRequestErrorsArePermanent(t *testing.T) {
	providertest.CheckBadRequests(t, subject, []providertest.BadRequest{
		{Name: "no model", Request: provider.Request{Messages: subject.Request.Messages}, Kind: keel.ProviderUnknownModel},
		{Name: "bad role", Request: provider.Request{Model: "m", Messages: []keel.Message{{Role: "robot", Content: "x"}}}, Kind: keel.ProviderInvalidRequest},
		{Name: "bad schema", Request: provider.Request{Model: "m", Messages: subject.Request.Messages,
			Tools: []keel.ToolSpec{{Name: "t", Parameters: json.RawMessage(`"string"`)}}}, Kind: keel.ProviderInvalidRequest},
		{Name: "bad arguments", Request: provider.Request{Model: "m", Messages: []keel.Message{
			{Role: keel.RoleAssistant, ToolCalls: []keel.ToolCall{{ID: "c", Name: "t", Arguments: json.RawMessage(`{"a":`)}}}}},
			Kind: keel.ProviderInvalidRequest},
	})
}

// A server that echoes a key in a form no pattern knows (a gateway's own
// token) still never gets it into the error: the provider redacts its own
// key by value.
func TestEchoedKeyOfAnyFormRedacted(t *testing.T) {
	const key = "gw_7Hq2LmX9pR4tZ8vW1nB6"
	srv := providertest.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"type":"error","error":{"type":"authentication_error","message":"unknown token ` + key + `"}}`))
	})
	p, err := New(Config{BaseURL: srv.URL, APIKey: key})
	if err != nil {
		t.Fatal(err)
	}
	_, err = providertest.Collect(t, p.Stream(context.Background(), subject.Request))
	var pe *keel.ProviderError
	if !errors.As(err, &pe) || pe.Kind != keel.ProviderAuth || strings.Contains(err.Error(), key) ||
		!strings.Contains(pe.Message, "unknown token [redacted]") {
		t.Fatalf("error = %v, want an auth error with the key redacted", err)
	}
}

// A key problem is auth whatever the body's type says: a 403 is
// Anthropic's permission_error, and a 401 from a proxy in front of the API
// may call a wrong key "invalid_request_error".
func TestKeyProblemsAreAuth(t *testing.T) {
	providertest.CheckHTTPErrors(t, subject, []providertest.HTTPError{
		{Name: "401 authentication_error", Status: 401, Fixture: "error_401.json", Kind: keel.ProviderAuth, Message: "(authentication_error)"},
		{Name: "401 invalid_request_error", Status: 401, Fixture: "error_401_proxy.json", Kind: keel.ProviderAuth, Message: "invalid x-api-key"},
		{Name: "403 permission_error", Status: 403, Fixture: "error_403.json", Kind: keel.ProviderAuth, Message: "does not have permission"},
	})
}
