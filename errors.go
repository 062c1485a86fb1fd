package keel

import (
	"errors"
	"fmt"
)

// Code names a kind of failure. Codes travel on the wire (as the type of a
// Temporal ApplicationError and in run.failed events), so they are stable.
type Code string

// The failure codes.
const (
	CodeCancelled         Code = "keel.Cancelled"
	CodeMaxSteps          Code = "keel.MaxSteps"
	CodeRunActive         Code = "keel.RunActive"
	CodeRuntimeShutdown   Code = "keel.RuntimeShutdown"
	CodeNotFound          Code = "keel.NotFound"
	CodeInvalidInput      Code = "keel.InvalidInput"
	CodeUnknownRequest    Code = "keel.UnknownRequest"
	CodeInvalidAnswer     Code = "keel.InvalidAnswer"
	CodeRequesterGone     Code = "keel.RequesterGone"
	CodeNotAccepting      Code = "keel.NotAccepting"
	CodeDuplicateRequest  Code = "keel.DuplicateRequest"
	CodeProvider          Code = "keel.ProviderError"
	CodeMalformedResponse Code = "keel.MalformedResponse"
	CodeToolUnavailable   Code = "keel.ToolUnavailable"
	CodeTerminated        Code = "keel.Terminated"
	CodeInternal          Code = "keel.Internal"
)

// The codes of keel's limits (docs/contract.md §18).
const (
	// CodeTooLarge: a value (a prompt, a steering text, an answer, a run
	// configuration) is over its size limit. It is a kind of invalid
	// input: errors.Is matches ErrInvalidInput too, the code such values
	// had before. The gateway answers 413.
	CodeTooLarge Code = "keel.TooLarge"
	// CodeTooMany: a count limit is full (prompts queued in a session,
	// steering staged in a run). Retryable: the same call may succeed
	// once the queue drains. The gateway answers 429 with Retry-After.
	CodeTooMany Code = "keel.TooMany"
	// CodeHookStopped: a hook stopped the run (docs/contract.md §23); the
	// message is its reason. CodeHookFailed: a hook whose failure fails
	// the run failed after its retries; the message is its sanitized
	// error, Retryable its retryability.
	CodeHookStopped Code = "keel.HookStopped"
	CodeHookFailed  Code = "keel.HookFailed"
	// CodeBudgetExceeded: the next request would spend more than a budget
	// leaves (docs/contract.md §20). The run ended before the request,
	// with what it had done committed.
	CodeBudgetExceeded Code = "keel.BudgetExceeded"
)

// Error is keel's typed error. Compare with the sentinels below using
// errors.Is (codes are compared, not messages); a provider failure also
// unwraps to a *ProviderError.
type Error struct {
	Code      Code           `json:"code"`
	Message   string         `json:"message"`
	Retryable bool           `json:"retryable,omitempty"`
	Provider  *ProviderError `json:"provider,omitempty"`
}

func (e *Error) Error() string {
	if e.Message == "" {
		return string(e.Code)
	}
	return "keel: " + e.Message
}

// Is reports whether target is a keel *Error with the same code. A
// CodeTooLarge error also matches CodeInvalidInput.
func (e *Error) Is(target error) bool {
	var t *Error
	if !errors.As(target, &t) || t == nil {
		return false
	}
	return t.Code == e.Code || (e.Code == CodeTooLarge && t.Code == CodeInvalidInput)
}

// Unwrap returns the provider failure behind e, if any.
func (e *Error) Unwrap() error {
	if e.Provider == nil {
		return nil
	}
	return e.Provider
}

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Sentinels, for errors.Is.
var (
	ErrCancelled        = &Error{Code: CodeCancelled, Message: "run cancelled"}
	ErrMaxSteps         = &Error{Code: CodeMaxSteps, Message: "run reached its step limit"}
	ErrRunActive        = &Error{Code: CodeRunActive, Message: "a run is already active in this session"}
	ErrRuntimeShutdown  = &Error{Code: CodeRuntimeShutdown, Message: "runtime is shut down"}
	ErrNotFound         = &Error{Code: CodeNotFound, Message: "not found"}
	ErrInvalidInput     = &Error{Code: CodeInvalidInput, Message: "invalid input"}
	ErrUnknownRequest   = &Error{Code: CodeUnknownRequest, Message: "no open host-input request with this ID"}
	ErrInvalidAnswer    = &Error{Code: CodeInvalidAnswer, Message: "answer does not match the request's schema"}
	ErrRequesterGone    = &Error{Code: CodeRequesterGone, Message: "the tool that asked is gone"}
	ErrNotAccepting     = &Error{Code: CodeNotAccepting, Message: "run no longer accepts commands"}
	ErrDuplicateRequest = &Error{Code: CodeDuplicateRequest,
		Message: "host-input request ID reused within one tool batch"}
	ErrProvider          = &Error{Code: CodeProvider, Message: "provider request failed"}
	ErrMalformedResponse = &Error{Code: CodeMalformedResponse, Message: "malformed model response"}
	ErrTerminated        = &Error{Code: CodeTerminated, Message: "run workflow was terminated"}
	ErrTooLarge          = &Error{Code: CodeTooLarge, Message: "value over its size limit"}
	ErrTooMany           = &Error{Code: CodeTooMany, Message: "count limit reached", Retryable: true}
	ErrBudgetExceeded    = &Error{Code: CodeBudgetExceeded, Message: "budget exceeded"}
)

// ProviderErrorKind classifies a provider failure.
type ProviderErrorKind string

// The kinds of provider failure. The first group is retryable.
const (
	ProviderRateLimited    ProviderErrorKind = "rate_limited"    // 429
	ProviderOverloaded     ProviderErrorKind = "overloaded"      // 503, 529
	ProviderServer         ProviderErrorKind = "server_error"    // other 5xx
	ProviderTimeout        ProviderErrorKind = "timeout"         // 408, deadlines
	ProviderConflict       ProviderErrorKind = "conflict"        // 409
	ProviderConnection     ProviderErrorKind = "connection"      // reset, refused
	ProviderStreamCut      ProviderErrorKind = "stream_cut"      // stream ended mid-response
	ProviderWorkerLost     ProviderErrorKind = "worker_lost"     // the activity's worker stopped
	ProviderAuth           ProviderErrorKind = "auth"            // 401, 403
	ProviderInvalidRequest ProviderErrorKind = "invalid_request" // other 4xx
	ProviderMalformed      ProviderErrorKind = "malformed"       // unusable response
	ProviderUnknownModel   ProviderErrorKind = "unknown_model"   // not configured
)

// ProviderError is one failed provider request. Its text is sanitized: it
// never holds API keys or request headers.
type ProviderError struct {
	Provider   string            `json:"provider"`
	Kind       ProviderErrorKind `json:"kind"`
	Status     int               `json:"status,omitempty"`
	RetryAfter Duration          `json:"retry_after,omitempty"`
	Retryable  bool              `json:"retryable"`
	Message    string            `json:"message"`
}

func (e *ProviderError) Error() string {
	s := e.Provider + ": " + string(e.Kind)
	if e.Status != 0 {
		s += fmt.Sprintf(" (HTTP %d)", e.Status)
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Retryable reports whether failures of kind k are worth retrying.
func (k ProviderErrorKind) Retryable() bool {
	switch k {
	case ProviderRateLimited, ProviderOverloaded, ProviderServer, ProviderTimeout,
		ProviderConflict, ProviderConnection, ProviderStreamCut, ProviderWorkerLost:
		return true
	}
	return false
}
