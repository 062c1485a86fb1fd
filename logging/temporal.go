package logging

import (
	"fmt"

	sdklog "go.temporal.io/sdk/log"
	"go.uber.org/zap"
)

// The Temporal SDK's tag for a workflow ID (its internal tagWorkflowID).
const sdkWorkflowIDKey = "WorkflowID"

// sdkLogger is the Temporal SDK's logger interface over a zap logger.
type sdkLogger struct{ l *zap.Logger }

var (
	_ sdklog.Logger          = sdkLogger{}
	_ sdklog.WithLogger      = sdkLogger{}
	_ sdklog.WithSkipCallers = sdkLogger{}
)

// Temporal returns l as the Temporal SDK's logger (client.Options.Logger),
// so the SDK's records (workers starting, activity failures, workflow
// panics, and what workflows log with workflow.GetLogger) reach the same
// sink as keel's. The SDK's key-value pairs become fields under their own
// names (WorkflowID, RunID for Temporal's run, Attempt, …); a keel
// workflow ID adds session_id and run_id as WorkflowFields derives them.
func Temporal(l *zap.Logger) sdklog.Logger {
	return sdkLogger{l: l.WithOptions(zap.AddCallerSkip(1))}
}

func (s sdkLogger) Debug(msg string, keyvals ...any) { s.l.Debug(msg, fields(keyvals)...) }
func (s sdkLogger) Info(msg string, keyvals ...any)  { s.l.Info(msg, fields(keyvals)...) }
func (s sdkLogger) Warn(msg string, keyvals ...any)  { s.l.Warn(msg, fields(keyvals)...) }
func (s sdkLogger) Error(msg string, keyvals ...any) { s.l.Error(msg, fields(keyvals)...) }

// With implements sdklog.WithLogger: the SDK prepends a workflow's or an
// activity's tags once, not on every record.
func (s sdkLogger) With(keyvals ...any) sdklog.Logger {
	return sdkLogger{l: s.l.With(fields(keyvals)...)}
}

// WithCallerSkip implements sdklog.WithSkipCallers, so the caller field
// names the SDK's caller rather than the SDK's logging wrapper.
func (s sdkLogger) WithCallerSkip(depth int) sdklog.Logger {
	return sdkLogger{l: s.l.WithOptions(zap.AddCallerSkip(depth))}
}

// fields turns the SDK's alternating keys and values into zap fields. A
// key that is not a string, or a key without a value, is kept under a
// made-up key rather than dropped.
func fields(keyvals []any) []zap.Field {
	if len(keyvals) == 0 {
		return nil
	}
	out := make([]zap.Field, 0, len(keyvals)/2+2)
	for i := 0; i < len(keyvals); i += 2 {
		key, ok := keyvals[i].(string)
		if !ok {
			key = fmt.Sprintf("!badkey(%v)", keyvals[i])
		}
		if i+1 == len(keyvals) {
			out = append(out, zap.Any("!missing", keyvals[i]))
			break
		}
		v := keyvals[i+1]
		out = append(out, zap.Any(key, v))
		if id, ok := v.(string); ok && key == sdkWorkflowIDKey {
			out = append(out, WorkflowFields(id)...)
		}
	}
	return out
}
