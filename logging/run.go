package logging

import (
	"context"
	"strings"

	"go.uber.org/zap"

	"github.com/keelrun/keel/api"
)

// The fields that tie a record to a run. Every record about a run carries
// them under these names, whoever writes it.
const (
	FieldSessionID = "session_id"
	FieldRunID     = "run_id"
	FieldStep      = "step"
	FieldAttempt   = "attempt"
)

// ForRun returns l with the fields of one step's attempt of a run. A step
// or attempt of 0 (not known to the caller) is left out.
func ForRun(l *zap.Logger, sessionID, runID string, step, attempt int) *zap.Logger {
	fields := make([]zap.Field, 0, 4)
	fields = append(fields, zap.String(FieldSessionID, sessionID), zap.String(FieldRunID, runID))
	if step > 0 {
		fields = append(fields, zap.Int(FieldStep, step))
	}
	if attempt > 0 {
		fields = append(fields, zap.Int(FieldAttempt, attempt))
	}
	return l.With(fields...)
}

// ForWorkflow returns l with the session and run fields that a keel
// workflow ID says (WorkflowFields), and l itself for any other ID.
func ForWorkflow(l *zap.Logger, workflowID string) *zap.Logger {
	fields := WorkflowFields(workflowID)
	if len(fields) == 0 {
		return l
	}
	return l.With(fields...)
}

// runSeparator splits a run ID into its session's ID and the run number
// (keel.RunID); a session ID never holds a '/'.
const runSeparator = "/run-"

// WorkflowFields returns the session_id and run_id fields of a keel
// workflow ID or run ID: a Session workflow's ID is its session ID; a run
// ID is "<session>/run-<n>". The Runtime workflow and IDs that are not
// keel's give none.
func WorkflowFields(workflowID string) []zap.Field {
	if workflowID == "" || workflowID == api.RuntimeWorkflowID {
		return nil
	}
	if session, _, ok := strings.Cut(workflowID, runSeparator); ok {
		return []zap.Field{zap.String(FieldSessionID, session), zap.String(FieldRunID, workflowID)}
	}
	if strings.Contains(workflowID, "/") {
		return nil
	}
	return []zap.Field{zap.String(FieldSessionID, workflowID)}
}

type contextKey struct{}

// NewContext returns ctx carrying l, for code that learns of its run only
// through its context (FromContext).
func NewContext(ctx context.Context, l *zap.Logger) context.Context {
	return context.WithValue(ctx, contextKey{}, l)
}

// FromContext returns the logger NewContext put in ctx, else fallback.
func FromContext(ctx context.Context, fallback *zap.Logger) *zap.Logger {
	if l, ok := ctx.Value(contextKey{}).(*zap.Logger); ok {
		return l
	}
	return fallback
}
