package provider

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/keelrun/keel"
)

// Retry timing, from the retry contract: retryable failures wait
// RetryBackoffBase doubled per failed attempt (1 s, 2 s, 4 s), or the
// provider's Retry-After hint capped at MaxRetryAfter when that is longer.
const (
	RetryBackoffBase = time.Second
	MaxRetryAfter    = 60 * time.Second
)

// maxRetryAfterHint bounds a parsed Retry-After so absurd header values
// cannot overflow a time.Duration. The workflow caps the wait far lower.
const maxRetryAfterHint = 24 * time.Hour

// maxMessageLen is how many characters of a provider's error text a
// ProviderError keeps.
const maxMessageLen = 400

// maxBodyScan is how much of an error body is examined at all.
const maxBodyScan = 16 << 10

// ErrStreamCut says a response stream ended before the provider finished
// it: the connection closed or failed before the end marker. Backends wrap
// it around the transport error, if any; Classify makes it a retryable
// keel.ProviderStreamCut.
var ErrStreamCut = errors.New("provider: response stream ended early")

// HTTPError is a provider failure seen over HTTP, in the neutral form every
// backend converts its SDK's error into. It is either a response with an
// error status, or an error event inside a streamed response; then Status
// is the stream's own status (200), Header is nil and Body is the event's
// data.
type HTTPError struct {
	Status int
	Header http.Header
	Body   []byte
}

// Error returns the status only: the body may echo request details, so it
// is shown only after Classify sanitized it.
func (e *HTTPError) Error() string {
	if e.Status >= 400 {
		return "provider: HTTP " + strconv.Itoa(e.Status)
	}
	return "provider: error event in response stream"
}

// Classify turns a provider failure into a *keel.ProviderError with a
// sanitized message. It recognizes *HTTPError, ErrStreamCut, and transport
// failures (connection refused or reset, timeouts, early EOF).
//
// It returns err unchanged when err is nil, a context error (so a caller's
// cancellation stays recognizable), a *MalformedError, already a
// *keel.ProviderError, or anything it does not recognize.
func Classify(provider string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var pe *keel.ProviderError
	if errors.As(err, &pe) {
		return err
	}
	var me *MalformedError
	if errors.As(err, &me) {
		return err
	}
	var he *HTTPError
	if errors.As(err, &he) {
		return classifyHTTP(provider, he, time.Now())
	}
	return classifyTransport(provider, err)
}

// AsProviderError returns err as a *keel.ProviderError, for a caller that
// needs one whatever went wrong: what Classify recognizes (or err already
// wraps) keeps its classification; anything else, context errors and
// *MalformedError included, is a permanent invalid_request failure with
// sanitized text. It returns nil for a nil err. This is the one fallback
// classification of an arbitrary backend error; Failure uses it too.
func AsProviderError(provider string, err error) *keel.ProviderError {
	if err == nil {
		return nil
	}
	var pe *keel.ProviderError
	if errors.As(Classify(provider, err), &pe) {
		return pe
	}
	return &keel.ProviderError{Provider: provider, Kind: keel.ProviderInvalidRequest,
		Message: Sanitize(err.Error())}
}

// Failure is a backend's final word on a failed stream: AsProviderError,
// except that context errors, *MalformedError and errors that already wrap
// a *keel.ProviderError pass through unchanged, so a caller's cancellation
// and a malformed response stay recognizable. What Classify does not
// recognize happened before a request went out (building it failed), so it
// becomes a permanent invalid_request error.
func Failure(provider string, err error) error {
	var pe *keel.ProviderError
	var me *MalformedError
	if err == nil || errors.As(err, &pe) || errors.As(err, &me) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return AsProviderError(provider, err)
}

// RetryDelay is how long to wait after failedAttempt (from 1) failed
// retryably: max(min(retryAfter, MaxRetryAfter), backoff), where backoff is
// 1 s, 2 s, 4 s for failed attempts 1, 2, 3 (and keeps doubling after).
func RetryDelay(failedAttempt int, retryAfter time.Duration) time.Duration {
	n := max(failedAttempt, 1) - 1
	backoff := RetryBackoffBase << min(n, 16)
	hint := min(max(retryAfter, 0), MaxRetryAfter)
	return max(hint, backoff)
}

// kindForStatus is the classification table for HTTP error statuses. The
// status decides whatever the body's type says: a 401 or 403 is a key or
// permission problem even when the body calls it "invalid_request_error".
func kindForStatus(status int) (keel.ProviderErrorKind, bool) {
	switch {
	case status == http.StatusRequestTimeout:
		return keel.ProviderTimeout, true
	case status == http.StatusConflict:
		return keel.ProviderConflict, true
	case status == http.StatusTooManyRequests:
		return keel.ProviderRateLimited, true
	case status == http.StatusServiceUnavailable || status == 529:
		return keel.ProviderOverloaded, true
	case status >= 500:
		return keel.ProviderServer, true
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return keel.ProviderAuth, false
	default:
		return keel.ProviderInvalidRequest, false
	}
}

// kindForType classifies the error types providers put in error bodies and
// in-stream error events (Anthropic's "overloaded_error", OpenAI's
// "server_error", ...). ok is false for types it does not know.
func kindForType(typ string) (kind keel.ProviderErrorKind, retryable, ok bool) {
	switch typ {
	case "overloaded_error", "overloaded":
		return keel.ProviderOverloaded, true, true
	case "rate_limit_error", "rate_limit_exceeded":
		return keel.ProviderRateLimited, true, true
	case "api_error", "server_error", "internal_error", "internal_server_error":
		return keel.ProviderServer, true, true
	case "timeout_error", "timeout":
		return keel.ProviderTimeout, true, true
	case "authentication_error", "permission_error", "invalid_api_key":
		return keel.ProviderAuth, false, true
	case "not_found_error", "model_not_found":
		return keel.ProviderUnknownModel, false, true
	case "invalid_request_error", "request_too_large", "billing_error", "insufficient_quota":
		return keel.ProviderInvalidRequest, false, true
	}
	return "", false, false
}

func classifyHTTP(provider string, he *HTTPError, now time.Time) *keel.ProviderError {
	info := parseErrorBody(he.Body)
	pe := &keel.ProviderError{Provider: provider}
	switch {
	case he.Status >= 400:
		pe.Status = he.Status
		pe.Kind, pe.Retryable = kindForStatus(he.Status)
		// A 404 is a missing model only when the body says so; otherwise it
		// is more likely a wrong base URL.
		if he.Status == http.StatusNotFound && (info.code == "model_not_found" || info.typ == "not_found_error") {
			pe.Kind = keel.ProviderUnknownModel
		}
	case info.status >= 400 && info.status <= 599:
		// An error event that carries an HTTP-like status code (vLLM does).
		pe.Status = info.status
		pe.Kind, pe.Retryable = kindForStatus(info.status)
	default:
		// The code first: OpenAI's type is a broad category
		// ("invalid_request_error") and its code the specific failure
		// ("invalid_api_key", "model_not_found").
		var ok bool
		if pe.Kind, pe.Retryable, ok = kindForType(info.code); !ok {
			pe.Kind, pe.Retryable, ok = kindForType(info.typ)
		}
		if !ok {
			// The provider accepted the request and then failed while
			// generating: most likely its own trouble, so worth a retry.
			pe.Kind, pe.Retryable = keel.ProviderServer, true
		}
	}
	if pe.Retryable && he.Header != nil {
		pe.RetryAfter = keel.Duration(parseRetryAfter(he.Header, now))
	}
	pe.Message = info.message
	if pe.Message == "" && pe.Status != 0 {
		pe.Message = http.StatusText(pe.Status)
	}
	return pe
}

func classifyTransport(provider string, err error) error {
	pe := &keel.ProviderError{Provider: provider, Message: transportMessage(err)}
	var (
		urlErr  *url.Error
		certErr *tls.CertificateVerificationError
		authErr x509.UnknownAuthorityError
		hostErr x509.HostnameError
		netErr  net.Error
	)
	switch {
	case errors.Is(err, ErrStreamCut):
		pe.Kind, pe.Retryable = keel.ProviderStreamCut, true
	case errors.As(err, &certErr) || errors.As(err, &authErr) || errors.As(err, &hostErr):
		// A certificate problem does not go away by retrying.
		pe.Kind, pe.Retryable = keel.ProviderConnection, false
	case errors.As(err, &netErr) && netErr.Timeout():
		pe.Kind, pe.Retryable = keel.ProviderTimeout, true
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		pe.Kind, pe.Retryable = keel.ProviderConnection, true
	case errors.As(err, &urlErr):
		// Any other failure of the round trip itself, before a response:
		// DNS, a closed idle connection (EOF), a proxy hiccup.
		pe.Kind, pe.Retryable = keel.ProviderConnection, true
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		pe.Kind, pe.Retryable = keel.ProviderStreamCut, true
	default:
		var opErr *net.OpError
		if errors.As(err, &opErr) {
			pe.Kind, pe.Retryable = keel.ProviderConnection, true
			break
		}
		return err
	}
	return pe
}

// transportMessage describes a transport failure without the request URL,
// which may carry credentials in its query.
func transportMessage(err error) string {
	var urlErr *url.Error
	if errors.As(err, &urlErr) && urlErr.Err != nil {
		err = urlErr.Err
	}
	return Sanitize(err.Error())
}

// errorInfo is what an error body says, in the shapes providers use:
// {"error":{"message","type","code"}} (OpenAI, Anthropic inside
// {"type":"error",...}), {"error":"text"} (Ollama), {"message","type","code"}
// at the top level (vLLM), {"detail":"text"} (FastAPI servers).
type errorInfo struct {
	message, typ, code string
	status             int
}

func parseErrorBody(body []byte) errorInfo {
	if len(body) > maxBodyScan {
		body = body[:maxBodyScan]
	}
	var info errorInfo
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		info.message = Sanitize(string(body))
		return info
	}
	obj := top
	if raw, ok := top["error"]; ok {
		var inner map[string]json.RawMessage
		var text string
		switch {
		case json.Unmarshal(raw, &inner) == nil:
			obj = inner
		case json.Unmarshal(raw, &text) == nil:
			info.message = Sanitize(text)
			return info
		}
	}
	info.message = Sanitize(jsonString(obj["message"]))
	if info.message == "" {
		info.message = Sanitize(jsonString(obj["detail"]))
	}
	info.typ = jsonString(obj["type"])
	if info.typ == "error" { // Anthropic's envelope type, not the error's.
		info.typ = ""
	}
	info.code = jsonString(obj["code"])
	if n, err := strconv.Atoi(info.code); err == nil {
		info.status = n
		info.code = ""
	}
	// The message names the provider's most specific word for the failure:
	// OpenAI answers a bad key with 401, type "invalid_request_error" and
	// code "invalid_api_key", and only the code agrees with the status.
	if detail := cmp.Or(info.code, info.typ); detail != "" && info.message != "" {
		info.message += " (" + Sanitize(detail) + ")"
	}
	return info
}

// jsonString reads a JSON string or number as text; anything else is "".
func jsonString(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}

// parseRetryAfter reads retry-after-ms (milliseconds) or Retry-After
// (seconds or an HTTP date). It returns 0 when neither gives a positive wait.
func parseRetryAfter(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil {
			return clampHint(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		return clampHint(secs * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		return clampHint(float64(t.Sub(now)))
	}
	return 0
}

func clampHint(ns float64) time.Duration {
	switch {
	case math.IsNaN(ns) || ns <= 0:
		return 0
	case ns >= float64(maxRetryAfterHint):
		return maxRetryAfterHint
	}
	return time.Duration(ns)
}

var secretPatterns = []struct {
	re   *regexp.Regexp
	repl string
}{
	// OpenAI and Anthropic keys (sk-..., sk-proj-..., sk-ant-...), also the
	// half-masked form OpenAI echoes in 401 bodies.
	{regexp.MustCompile(`sk-[A-Za-z0-9_\-*.]{4,}`), "sk-[redacted]"},
	{regexp.MustCompile(`(?i)\bbearer\s+[A-Za-z0-9._~+/=\-]+`), "Bearer [redacted]"},
	{regexp.MustCompile(`(?i)\b(api[_-]?key|x-api-key|authorization|access[_-]?token|auth[_-]?token|secret)(["']?\s*[:=]\s*["']?)[^\s"',;&}]+`), "${1}${2}[redacted]"},
	{regexp.MustCompile(`AIza[0-9A-Za-z_\-]{20,}`), "[redacted]"},
}

// Sanitize makes provider text safe to keep in events and history: things
// that look like API keys or bearer tokens are redacted, control characters
// and runs of whitespace collapse to one space, and the length is bounded.
func Sanitize(s string) string {
	if len(s) > maxBodyScan {
		s = s[:maxBodyScan]
	}
	s = strings.ToValidUTF8(s, "")
	for _, p := range secretPatterns {
		s = p.re.ReplaceAllString(s, p.repl)
	}
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r)
	}), " ")
	if utf8.RuneCountInString(s) > maxMessageLen {
		r := []rune(s)
		s = string(r[:maxMessageLen-1]) + "…"
	}
	return s
}
