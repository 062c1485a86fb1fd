package provider

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/keelrun/keel"
)

func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func TestClassifyHTTPStatus(t *testing.T) {
	tests := []struct {
		name string
		err  *HTTPError
		want *keel.ProviderError
	}{
		{"400", &HTTPError{Status: 400, Body: []byte(`{"error":{"message":"messages: field required","type":"invalid_request_error"}}`)},
			&keel.ProviderError{Provider: "p", Kind: keel.ProviderInvalidRequest, Status: 400, Message: "messages: field required (invalid_request_error)"}},
		{"401", &HTTPError{Status: 401, Body: []byte(`{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`)},
			&keel.ProviderError{Provider: "p", Kind: keel.ProviderAuth, Status: 401, Message: "invalid x-api-key (authentication_error)"}},
		{"401 openai invalid_api_key", &HTTPError{Status: 401, Body: []byte(`{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`)},
			&keel.ProviderError{Provider: "p", Kind: keel.ProviderAuth, Status: 401, Message: "Incorrect API key provided (invalid_api_key)"}},
		{"403 openai scope", &HTTPError{Status: 403, Body: []byte(`{"error":{"message":"Missing scopes: model.request","type":"invalid_request_error","param":null,"code":null}}`)},
			&keel.ProviderError{Provider: "p", Kind: keel.ProviderAuth, Status: 403, Message: "Missing scopes: model.request (invalid_request_error)"}},
		{"403", &HTTPError{Status: 403},
			&keel.ProviderError{Provider: "p", Kind: keel.ProviderAuth, Status: 403, Message: "Forbidden"}},
		{"404 path", &HTTPError{Status: 404, Body: []byte(`404 page not found`)},
			&keel.ProviderError{Provider: "p", Kind: keel.ProviderInvalidRequest, Status: 404, Message: "404 page not found"}},
		{"404 model openai", &HTTPError{Status: 404, Body: []byte(`{"error":{"message":"The model gpt-9 does not exist","type":"invalid_request_error","code":"model_not_found"}}`)},
			&keel.ProviderError{Provider: "p", Kind: keel.ProviderUnknownModel, Status: 404, Message: "The model gpt-9 does not exist (model_not_found)"}},
		{"404 model anthropic", &HTTPError{Status: 404, Body: []byte(`{"type":"error","error":{"type":"not_found_error","message":"model: claude-9"}}`)},
			&keel.ProviderError{Provider: "p", Kind: keel.ProviderUnknownModel, Status: 404, Message: "model: claude-9 (not_found_error)"}},
		{"408", &HTTPError{Status: 408},
			&keel.ProviderError{Provider: "p", Kind: keel.ProviderTimeout, Status: 408, Retryable: true, Message: "Request Timeout"}},
		{"409", &HTTPError{Status: 409},
			&keel.ProviderError{Provider: "p", Kind: keel.ProviderConflict, Status: 409, Retryable: true, Message: "Conflict"}},
		{"413", &HTTPError{Status: 413},
			&keel.ProviderError{Provider: "p", Kind: keel.ProviderInvalidRequest, Status: 413, Message: "Request Entity Too Large"}},
		{"422 detail", &HTTPError{Status: 422, Body: []byte(`{"detail":"bad field"}`)},
			&keel.ProviderError{Provider: "p", Kind: keel.ProviderInvalidRequest, Status: 422, Message: "bad field"}},
		{"429 seconds", &HTTPError{Status: 429, Header: header("Retry-After", "7"), Body: []byte(`{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`)},
			&keel.ProviderError{Provider: "p", Kind: keel.ProviderRateLimited, Status: 429, Retryable: true, RetryAfter: keel.Duration(7 * time.Second), Message: "Rate limit reached (rate_limit_exceeded)"}},
		{"429 ms wins", &HTTPError{Status: 429, Header: header("Retry-After", "7", "retry-after-ms", "1500")},
			&keel.ProviderError{Provider: "p", Kind: keel.ProviderRateLimited, Status: 429, Retryable: true, RetryAfter: keel.Duration(1500 * time.Millisecond), Message: "Too Many Requests"}},
		{"500 ollama", &HTTPError{Status: 500, Body: []byte(`{"error":"llama runner process has terminated"}`)},
			&keel.ProviderError{Provider: "p", Kind: keel.ProviderServer, Status: 500, Retryable: true, Message: "llama runner process has terminated"}},
		{"502 html", &HTTPError{Status: 502, Body: []byte("<html>\n<body>\n502 Bad Gateway\n</body></html>")},
			&keel.ProviderError{Provider: "p", Kind: keel.ProviderServer, Status: 502, Retryable: true, Message: "<html> <body> 502 Bad Gateway </body></html>"}},
		{"503", &HTTPError{Status: 503, Header: header("Retry-After", "2")},
			&keel.ProviderError{Provider: "p", Kind: keel.ProviderOverloaded, Status: 503, Retryable: true, RetryAfter: keel.Duration(2 * time.Second), Message: "Service Unavailable"}},
		{"504", &HTTPError{Status: 504},
			&keel.ProviderError{Provider: "p", Kind: keel.ProviderServer, Status: 504, Retryable: true, Message: "Gateway Timeout"}},
		{"529", &HTTPError{Status: 529, Body: []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)},
			&keel.ProviderError{Provider: "p", Kind: keel.ProviderOverloaded, Status: 529, Retryable: true, Message: "Overloaded (overloaded_error)"}},
		{"400 ignores retry-after", &HTTPError{Status: 400, Header: header("Retry-After", "9")},
			&keel.ProviderError{Provider: "p", Kind: keel.ProviderInvalidRequest, Status: 400, Message: "Bad Request"}},
		{"stream event anthropic overloaded", &HTTPError{Status: 200, Body: []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)},
			&keel.ProviderError{Provider: "p", Kind: keel.ProviderOverloaded, Retryable: true, Message: "Overloaded (overloaded_error)"}},
		{"stream event anthropic invalid", &HTTPError{Status: 200, Body: []byte(`{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}`)},
			&keel.ProviderError{Provider: "p", Kind: keel.ProviderInvalidRequest, Message: "bad (invalid_request_error)"}},
		{"stream event openai", &HTTPError{Status: 200, Body: []byte(`{"error":{"message":"The server had an error","type":"server_error"}}`)},
			&keel.ProviderError{Provider: "p", Kind: keel.ProviderServer, Retryable: true, Message: "The server had an error (server_error)"}},
		{"stream event code only", &HTTPError{Status: 200, Body: []byte(`{"error":{"message":"slow down","code":"rate_limit_exceeded"}}`)},
			&keel.ProviderError{Provider: "p", Kind: keel.ProviderRateLimited, Retryable: true, Message: "slow down (rate_limit_exceeded)"}},
		{"stream event openai invalid_api_key", &HTTPError{Status: 200, Body: []byte(`{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`)},
			&keel.ProviderError{Provider: "p", Kind: keel.ProviderAuth, Message: "Incorrect API key provided (invalid_api_key)"}},
		{"stream event vllm status", &HTTPError{Status: 200, Body: []byte(`{"error":{"object":"error","message":"too long","type":"BadRequestError","code":400}}`)},
			&keel.ProviderError{Provider: "p", Kind: keel.ProviderInvalidRequest, Status: 400, Message: "too long (BadRequestError)"}},
		{"stream event unknown", &HTTPError{Status: 200, Body: []byte(`{"error":{"message":"boom","type":"mystery"}}`)},
			&keel.ProviderError{Provider: "p", Kind: keel.ProviderServer, Retryable: true, Message: "boom (mystery)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Classify("p", fmt.Errorf("wrapped: %w", tt.err))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Classify (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		h    http.Header
		want time.Duration
	}{
		{"none", header(), 0},
		{"seconds", header("Retry-After", "30"), 30 * time.Second},
		{"fractional seconds", header("Retry-After", "1.5"), 1500 * time.Millisecond},
		{"http date", header("Retry-After", now.Add(45*time.Second).Format(http.TimeFormat)), 45 * time.Second},
		{"date in the past", header("Retry-After", now.Add(-time.Minute).Format(http.TimeFormat)), 0},
		{"milliseconds", header("retry-after-ms", "250"), 250 * time.Millisecond},
		{"milliseconds preferred", header("retry-after-ms", "250", "Retry-After", "3"), 250 * time.Millisecond},
		{"bad milliseconds fall back", header("retry-after-ms", "soon", "Retry-After", "3"), 3 * time.Second},
		{"zero", header("Retry-After", "0"), 0},
		{"negative", header("Retry-After", "-5"), 0},
		{"garbage", header("Retry-After", "tomorrow"), 0},
		{"NaN", header("Retry-After", "NaN"), 0},
		{"huge", header("Retry-After", "1e300"), maxRetryAfterHint},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := parseRetryAfter(tt.h, now); got != tt.want {
				t.Errorf("parseRetryAfter = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRetryDelay(t *testing.T) {
	tests := []struct {
		attempt int
		hint    time.Duration
		want    time.Duration
	}{
		{1, 0, 1 * time.Second},
		{2, 0, 2 * time.Second},
		{3, 0, 4 * time.Second},
		{0, 0, 1 * time.Second},
		{1, 500 * time.Millisecond, 1 * time.Second},
		{1, 5 * time.Second, 5 * time.Second},
		{3, 3 * time.Second, 4 * time.Second},
		{3, 10 * time.Second, 10 * time.Second},
		{2, 90 * time.Second, MaxRetryAfter},
		{1, 3 * time.Hour, MaxRetryAfter},
		{1, -time.Second, 1 * time.Second},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("attempt %d hint %v", tt.attempt, tt.hint), func(t *testing.T) {
			if got := RetryDelay(tt.attempt, tt.hint); got != tt.want {
				t.Errorf("RetryDelay(%d, %v) = %v, want %v", tt.attempt, tt.hint, got, tt.want)
			}
		})
	}
	if RetryBackoffBase != time.Second || MaxRetryAfter != time.Minute {
		t.Errorf("constants drifted from the retry contract: base %v, cap %v", RetryBackoffBase, MaxRetryAfter)
	}
}

func TestClassifySanitizes(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		secrets []string
	}{
		{"openai key echo", `{"error":{"message":"Incorrect API key provided: sk-proj-abcDEF123456789. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","code":"invalid_api_key"}}`,
			[]string{"sk-proj-abcDEF123456789", "abcDEF123456789"}},
		{"anthropic key", `{"type":"error","error":{"type":"authentication_error","message":"bad key sk-ant-api03-zzzzYYYYxxxx"}}`,
			[]string{"sk-ant-api03-zzzzYYYYxxxx", "zzzzYYYYxxxx"}},
		{"bearer echo", "proxy said: Authorization: Bearer eyJhbGciOi.payload.sig rejected",
			[]string{"eyJhbGciOi", "payload.sig"}},
		{"key-value", `{"detail":"invalid api_key=abc123secret in request"}`,
			[]string{"abc123secret"}},
		{"x-api-key header dump", "headers: x-api-key: topsecretvalue42",
			[]string{"topsecretvalue42"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Classify("p", &HTTPError{Status: 401, Header: header("Authorization", "Bearer hdr-secret"), Body: []byte(tt.body)})
			var pe *keel.ProviderError
			if !errors.As(err, &pe) {
				t.Fatalf("Classify = %T, want *keel.ProviderError", err)
			}
			for _, s := range append(tt.secrets, "hdr-secret") {
				if strings.Contains(pe.Message, s) || strings.Contains(pe.Error(), s) {
					t.Errorf("message %q leaks %q", pe.Message, s)
				}
			}
			if !strings.Contains(pe.Message, "[redacted]") {
				t.Errorf("message %q has no redaction marker", pe.Message)
			}
		})
	}

	t.Run("long body trimmed", func(t *testing.T) {
		long := strings.Repeat("ä very long error ", 2000)
		err := Classify("p", &HTTPError{Status: 500, Body: []byte(long)})
		var pe *keel.ProviderError
		if !errors.As(err, &pe) {
			t.Fatalf("Classify = %T", err)
		}
		if n := utf8.RuneCountInString(pe.Message); n > maxMessageLen {
			t.Errorf("message has %d runes, want at most %d", n, maxMessageLen)
		}
		if !utf8.ValidString(pe.Message) || !strings.HasSuffix(pe.Message, "…") {
			t.Errorf("trimmed message %q is not valid UTF-8 ending in an ellipsis", pe.Message)
		}
	})

	t.Run("error string hides body", func(t *testing.T) {
		he := &HTTPError{Status: 401, Body: []byte("sk-live-secret-body")}
		if strings.Contains(he.Error(), "secret") {
			t.Errorf("HTTPError.Error() = %q shows the body", he.Error())
		}
	})
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestClassifyTransport(t *testing.T) {
	connErr := func(errno syscall.Errno) error {
		return &url.Error{Op: "Post", URL: "https://api.example.com/v1/chat?key=sk-inurl-secret", Err: &net.OpError{
			Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", errno)}}
	}
	tests := []struct {
		name      string
		err       error
		kind      keel.ProviderErrorKind
		retryable bool
	}{
		{"refused", connErr(syscall.ECONNREFUSED), keel.ProviderConnection, true},
		{"reset", connErr(syscall.ECONNRESET), keel.ProviderConnection, true},
		{"bare op error", &net.OpError{Op: "read", Net: "tcp", Err: errors.New("weird")}, keel.ProviderConnection, true},
		{"eof before response", &url.Error{Op: "Post", URL: "http://x", Err: io.EOF}, keel.ProviderConnection, true},
		{"unexpected eof mid stream", io.ErrUnexpectedEOF, keel.ProviderStreamCut, true},
		{"eof mid stream", fmt.Errorf("reading: %w", io.EOF), keel.ProviderStreamCut, true},
		{"stream cut marker", fmt.Errorf("%w: %w", ErrStreamCut, connErr(syscall.ECONNRESET)), keel.ProviderStreamCut, true},
		{"timeout", &url.Error{Op: "Post", URL: "http://x", Err: timeoutErr{}}, keel.ProviderTimeout, true},
		{"bad certificate", &url.Error{Op: "Post", URL: "https://x", Err: x509.UnknownAuthorityError{}}, keel.ProviderConnection, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Classify("openai", tt.err)
			var pe *keel.ProviderError
			if !errors.As(err, &pe) {
				t.Fatalf("Classify = %T %v, want *keel.ProviderError", err, err)
			}
			got := [2]any{pe.Kind, pe.Retryable}
			if diff := cmp.Diff([2]any{tt.kind, tt.retryable}, got); diff != "" {
				t.Errorf("kind, retryable (-want +got):\n%s", diff)
			}
			if pe.Provider != "openai" || pe.Message == "" {
				t.Errorf("ProviderError = %+v, want provider openai and a message", pe)
			}
			if strings.Contains(pe.Message, "sk-inurl-secret") || strings.Contains(pe.Message, "api.example.com") {
				t.Errorf("message %q shows the request URL", pe.Message)
			}
		})
	}
}

func TestClassifyRealConnectionRefused(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.URL
	srv.Close()
	_, err := http.Post(addr, "application/json", strings.NewReader("{}"))
	if err == nil {
		t.Fatal("POST to a closed server succeeded")
	}
	var pe *keel.ProviderError
	if !errors.As(Classify("p", err), &pe) || pe.Kind != keel.ProviderConnection || !pe.Retryable {
		t.Errorf("Classify(%v) = %+v, want retryable connection", err, pe)
	}
}

func TestClassifyLeavesAlone(t *testing.T) {
	pe := &keel.ProviderError{Provider: "x", Kind: keel.ProviderAuth}
	me := &MalformedError{Reason: "r"}
	other := errors.New("not a provider failure")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	wrappedCancel := &url.Error{Op: "Post", URL: "http://x", Err: ctx.Err()}
	tests := []struct {
		name string
		err  error
	}{
		{"nil", nil},
		{"canceled", context.Canceled},
		{"canceled inside url error", wrappedCancel},
		{"deadline", fmt.Errorf("read: %w", context.DeadlineExceeded)},
		{"provider error", pe},
		{"malformed", me},
		{"unknown", other},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Classify("p", tt.err); got != tt.err {
				t.Errorf("Classify(%v) = %v, want it unchanged", tt.err, got)
			}
		})
	}
}

func ExampleClassify() {
	err := Classify("openai", &HTTPError{
		Status: http.StatusTooManyRequests,
		Header: http.Header{"Retry-After": {"7"}},
		Body:   []byte(`{"error":{"message":"Rate limit reached","type":"requests"}}`),
	})
	var pe *keel.ProviderError
	if errors.As(err, &pe) {
		fmt.Println(pe.Kind, pe.Retryable, pe.RetryAfter)
	}
	fmt.Println(err)
	// Output:
	// rate_limited true 7s
	// openai: rate_limited (HTTP 429): Rate limit reached (requests)
}

func ExampleRetryDelay() {
	fmt.Println(RetryDelay(1, 0), RetryDelay(2, 0), RetryDelay(3, 0))
	// A Retry-After hint wins when longer, up to MaxRetryAfter.
	fmt.Println(RetryDelay(1, 10*time.Second), RetryDelay(2, 2*time.Hour))
	// Output:
	// 1s 2s 4s
	// 10s 1m0s
}

// Failure gives every error a runtime meaning: what Classify leaves alone
// and is not a context error or a malformed response is permanent.
func TestFailure(t *testing.T) {
	var pe *keel.ProviderError
	if err := Failure("p", errors.New("json: unsupported value: NaN")); !errors.As(err, &pe) ||
		pe.Kind != keel.ProviderInvalidRequest || pe.Retryable || pe.Provider != "p" {
		t.Errorf("unrecognized error became %#v, want a permanent invalid_request", err)
	}
	if err := Failure("p", &HTTPError{Status: 503}); !errors.As(err, &pe) || pe.Kind != keel.ProviderOverloaded || !pe.Retryable {
		t.Errorf("503 became %v, want retryable overloaded", err)
	}
	malformed := &MalformedError{Reason: "bad"}
	for _, err := range []error{nil, context.Canceled, context.DeadlineExceeded, malformed} {
		if got := Failure("p", err); got != err {
			t.Errorf("Failure(%v) = %v, want it unchanged", err, got)
		}
	}
}

// AsProviderError always answers with a *keel.ProviderError: Classify's
// when it has one, the inner one when err wraps it, and a permanent
// invalid_request with sanitized text for everything else, context errors
// and malformed responses included (a caller that wanted those would have
// checked for them first).
func TestAsProviderError(t *testing.T) {
	if got := AsProviderError("p", nil); got != nil {
		t.Errorf("AsProviderError(nil) = %v, want nil", got)
	}
	inner := &keel.ProviderError{Provider: "x", Kind: keel.ProviderAuth}
	if got := AsProviderError("p", fmt.Errorf("stream: %w", inner)); got != inner {
		t.Errorf("wrapped provider error became %#v, want the inner one", got)
	}
	if got := AsProviderError("p", &HTTPError{Status: 429}); got.Kind != keel.ProviderRateLimited || !got.Retryable {
		t.Errorf("429 became %#v, want retryable rate_limited", got)
	}
	if got := AsProviderError("p", fmt.Errorf("read: %w", ErrStreamCut)); got.Kind != keel.ProviderStreamCut || !got.Retryable {
		t.Errorf("stream cut became %#v, want retryable stream_cut", got)
	}
	permanent := func(msg string) *keel.ProviderError {
		return &keel.ProviderError{Provider: "p", Kind: keel.ProviderInvalidRequest, Message: msg}
	}
	for _, tt := range []struct {
		err  error
		want *keel.ProviderError
	}{
		{errors.New("build request: api_key=sk-abcdef123456"), permanent("build request: api_key=[redacted]")},
		{context.DeadlineExceeded, permanent("context deadline exceeded")},
		{&MalformedError{Reason: "bad json"}, permanent((&MalformedError{Reason: "bad json"}).Error())},
	} {
		if diff := cmp.Diff(tt.want, AsProviderError("p", tt.err)); diff != "" {
			t.Errorf("AsProviderError(%v) (-want +got):\n%s", tt.err, diff)
		}
	}
	// Failure is AsProviderError for what it does not pass through.
	unknown := errors.New("json: unsupported value: NaN")
	if diff := cmp.Diff(AsProviderError("p", unknown), Failure("p", unknown)); diff != "" {
		t.Errorf("Failure and AsProviderError disagree (-AsProviderError +Failure):\n%s", diff)
	}
	wrapped := fmt.Errorf("stream: %w", inner)
	if got := Failure("p", wrapped); got != wrapped {
		t.Errorf("Failure(%v) = %v, want it unchanged", wrapped, got)
	}
}
