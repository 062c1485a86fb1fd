package devserver

import (
	"fmt"
	"sync/atomic"

	sdklog "go.temporal.io/sdk/log"
	serverlog "go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/keelrun/keel/logging"
)

// serverLogger adapts a zap logger to the Temporal server's logger
// interface, dropping records below level before any tag is converted:
// the server logs at debug level on every hot path.
type serverLogger struct {
	zl    *zap.Logger
	level zapcore.LevelEnabler
	// stopping is set by Server.Stop: shutting down makes every in-flight
	// poll inside the server fail and log, which says nothing; real
	// failures come back from Stop.
	stopping *atomic.Bool
}

var (
	_ serverlog.Logger     = serverLogger{}
	_ serverlog.WithLogger = serverLogger{}
)

func newServerLogger(zl *zap.Logger, level zapcore.LevelEnabler) serverLogger {
	// Two frames (log, and Debug or its siblings) sit between the
	// server's call and zap: the caller field names the server's code.
	zl = zl.With(zap.String("component", "temporal")).WithOptions(zap.AddCallerSkip(2))
	return serverLogger{zl: zl, level: level, stopping: new(atomic.Bool)}
}

// benignWarnings are warnings the server logs on every start of a
// configuration keel chose on purpose.
var benignWarnings = map[string]bool{
	// keel does not use Nexus, so the frontend's HTTP port stays closed.
	"HTTP API port has not been set. Nexus HTTP endpoints will not be available. To enable Nexus, follow these instructions: https://github.com/temporalio/temporal/blob/main/docs/architecture/nexus.md#enabling-nexus.": true,
}

// fatalError is what the server's Fatal calls panic with instead of exiting
// the process: the caller of Start recovers it and gets an error back (a
// port taken between choosing it and binding it, for example).
type fatalError struct{ msg string }

func (e fatalError) Error() string { return "devserver: temporal server: " + e.msg }

func (l serverLogger) log(level zapcore.Level, msg string, tags []tag.Tag) {
	if !l.level.Enabled(level) || benignWarnings[msg] || (l.stopping.Load() && !l.level.Enabled(zapcore.DebugLevel)) {
		return
	}
	ce := l.zl.Check(level, msg)
	if ce == nil {
		return
	}
	ce.Write(tagFields(tags)...)
}

// tagFields turns the server's tags into fields; a keel workflow's ID adds
// the session_id and run_id it names, as in keel's own records.
func tagFields(tags []tag.Tag) []zap.Field {
	fields := make([]zap.Field, 0, len(tags))
	for _, t := range tags {
		fields = append(fields, zap.Any(t.Key(), t.Value()))
		if id, ok := t.Value().(string); ok && t.Key() == tag.WorkflowIDKey {
			fields = append(fields, logging.WorkflowFields(id)...)
		}
	}
	return fields
}

func (l serverLogger) Debug(msg string, tags ...tag.Tag) { l.log(zapcore.DebugLevel, msg, tags) }
func (l serverLogger) Info(msg string, tags ...tag.Tag)  { l.log(zapcore.InfoLevel, msg, tags) }
func (l serverLogger) Warn(msg string, tags ...tag.Tag)  { l.log(zapcore.WarnLevel, msg, tags) }
func (l serverLogger) Error(msg string, tags ...tag.Tag) { l.log(zapcore.ErrorLevel, msg, tags) }

// DPanic panics only in the server's development mode, which keel never
// runs, so it is an error record.
func (l serverLogger) DPanic(msg string, tags ...tag.Tag) { l.log(zapcore.ErrorLevel, msg, tags) }

func (l serverLogger) Panic(msg string, tags ...tag.Tag) {
	l.log(zapcore.ErrorLevel, msg, tags)
	panic(msg)
}

// Fatal would end the whole process (the dev server lives inside keel's
// CLI, tests and benchmarks); a panic stops the failing code path the same
// way and can be recovered by Start.
func (l serverLogger) Fatal(msg string, tags ...tag.Tag) {
	l.log(zapcore.ErrorLevel, msg, tags)
	for _, t := range tags {
		if t.Key() == "error" {
			msg = fmt.Sprintf("%s: %v", msg, t.Value())
		}
	}
	panic(fatalError{msg: msg})
}

// With lets the server prepend tags cheaply, as zap does with fields.
func (l serverLogger) With(tags ...tag.Tag) serverlog.Logger {
	return serverLogger{zl: l.zl.With(tagFields(tags)...), level: l.level, stopping: l.stopping}
}

// sdkLogger is the Temporal SDK's logger for the clients Server.Dial
// builds, as quiet as the server.
func sdkLogger(zl *zap.Logger, level zapcore.LevelEnabler) sdklog.Logger {
	return logging.Temporal(logging.AtLeast(zl, level))
}
