package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"unicode"

	"go.temporal.io/api/serviceerror"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/internal/httpguard"
	"github.com/keelrun/keel/server/store"
)

// Error is the body of every error response: a stable snake_case Code
// (derived from keel's code when keel refused the call, such as
// "run_active" for keel.RunActive), a human Message, and KeelCode, the
// keel.Code itself, when there is one.
type Error struct {
	Code     string    `json:"code"`
	Message  string    `json:"message"`
	KeelCode keel.Code `json:"keel_code,omitempty"`
	// Retryable is keel's hint that the same call may succeed later.
	Retryable bool `json:"retryable,omitempty"`
	status    int
	// retryAfter is the Retry-After of a 429 or 503 answer, in seconds
	// (at least 1).
	retryAfter int
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// The gateway's own error codes, for failures keel's codes do not name.
const (
	CodeUnauthorized     = "unauthorized"
	CodeBodyTooLarge     = "body_too_large"
	CodeBadRequest       = "invalid_input"
	CodeRouteNotFound    = "route_not_found"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeOriginNotAllowed = "origin_not_allowed"
	CodeHostNotAllowed   = "host_not_allowed"
	CodeUnavailable      = "unavailable"
	CodeOverloaded       = "overloaded"
	CodeInternal         = "internal"
	// CodeForbidden refuses what the request's API key may not do: a
	// read-only key's POST or DELETE, or a route its session prefix does
	// not cover (403).
	CodeForbidden = "forbidden"
	// CodeTooManyStreams refuses an event stream past a client's own
	// limit: its API key's or its address's (429 with Retry-After).
	CodeTooManyStreams = "too_many_streams"
	// CodeCursorAhead refuses an event stream whose cursor (Last-Event-ID
	// or after) is past the end of the session's log: the session was
	// recreated, or the ID came from another session (409). Start again
	// from 0.
	CodeCursorAhead = "cursor_ahead"
)

// CodeUnsupportedMediaType: a body not sent as Content-Type:
// application/json (415).
const CodeUnsupportedMediaType = httpguard.CodeUnsupportedMediaType

// apiError returns an error response with the given status and code.
func apiError(status int, code, format string) *Error {
	return &Error{Code: code, Message: format, status: status}
}

// statusOf maps keel's codes to HTTP statuses: the caller's input (400),
// what it names is not there (404), the session or run refuses it in its
// current state (409), a value over its size limit (413), a count limit
// full (429, with Retry-After), and the rest (500).
var statusOf = map[keel.Code]int{
	keel.CodeInvalidInput:     http.StatusBadRequest,
	keel.CodeInvalidAnswer:    http.StatusBadRequest,
	keel.CodeDuplicateRequest: http.StatusBadRequest,
	keel.CodeNotFound:         http.StatusNotFound,
	keel.CodeUnknownRequest:   http.StatusNotFound,
	keel.CodeRunActive:        http.StatusConflict,
	keel.CodeNotAccepting:     http.StatusConflict,
	keel.CodeRequesterGone:    http.StatusConflict,
	keel.CodeRuntimeShutdown:  http.StatusConflict,
	// Over a limit of the workflows (docs/contract.md §18).
	keel.CodeTooLarge: http.StatusRequestEntityTooLarge,
	keel.CodeTooMany:  http.StatusTooManyRequests,
}

// fromError turns what a client call returned into an error response.
// Messages of keel's typed errors are meant for callers; other errors
// (Temporal's, the network's) are reported by kind, not by text, since
// their text can name internal addresses.
func fromError(err error) *Error {
	var gw *Error
	if errors.As(err, &gw) {
		return gw
	}
	var ke *keel.Error
	if errors.As(err, &ke) {
		status, ok := statusOf[ke.Code]
		if !ok {
			status = http.StatusInternalServerError
		}
		msg := strings.TrimPrefix(ke.Error(), "keel: ")
		return &Error{Code: snake(ke.Code), Message: msg, KeelCode: ke.Code, Retryable: ke.Retryable, status: status}
	}
	var unavailable *serviceerror.Unavailable
	var deadline *serviceerror.DeadlineExceeded
	var exhausted *serviceerror.ResourceExhausted
	switch {
	case errors.As(err, &exhausted):
		// Temporal's limits, such as its concurrent long polls per
		// namespace (every event stream holds one).
		return &Error{Code: CodeOverloaded, Message: "Temporal refused the call for now (" + exhausted.Message + "); retry later",
			Retryable: true, status: http.StatusServiceUnavailable}
	case errors.As(err, &unavailable), errors.As(err, &deadline), errors.Is(err, context.DeadlineExceeded):
		return &Error{Code: CodeUnavailable, Message: "Temporal did not answer in time; is the server up and a worker running?",
			Retryable: true, status: http.StatusServiceUnavailable}
	case errors.Is(err, store.ErrUnreachable):
		return &Error{Code: CodeUnavailable, Message: "the content store could not be reached", Retryable: true,
			status: http.StatusServiceUnavailable}
	}
	return &Error{Code: CodeInternal, Message: "internal error (see the gateway's log)", status: http.StatusInternalServerError}
}

// snake turns "keel.RunActive" into "run_active".
func snake(c keel.Code) string {
	name := strings.TrimPrefix(string(c), "keel.")
	var b strings.Builder
	for i, r := range name {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// writeJSON writes v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// writeError writes e as the response.
func writeError(w http.ResponseWriter, e *Error) {
	switch e.status {
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="keel"`)
	case http.StatusServiceUnavailable, http.StatusTooManyRequests:
		w.Header().Set("Retry-After", strconv.Itoa(max(e.retryAfter, 1)))
	}
	writeJSON(w, e.status, e)
}
