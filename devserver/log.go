package devserver

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync/atomic"
	"time"

	sdklog "go.temporal.io/sdk/log"
	serverlog "go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
)

// serverLogger adapts an slog.Logger to the Temporal server's logger
// interface, dropping records below level before any tag is converted:
// the server logs at debug level on every hot path.
type serverLogger struct {
	sl    *slog.Logger
	level slog.Leveler
	// stopping is set by Server.Stop: shutting down makes every in-flight
	// poll inside the server fail and log, which says nothing; real
	// failures come back from Stop.
	stopping *atomic.Bool
}

var (
	_ serverlog.Logger     = serverLogger{}
	_ serverlog.WithLogger = serverLogger{}
)

func newServerLogger(sl *slog.Logger, level slog.Leveler) serverLogger {
	return serverLogger{sl: sl.With("component", "temporal"), level: level, stopping: new(atomic.Bool)}
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

func (l serverLogger) log(level slog.Level, msg string, tags []tag.Tag) {
	least := l.level.Level()
	if level < least || benignWarnings[msg] || (l.stopping.Load() && least > slog.LevelDebug) {
		return
	}
	ctx := context.Background()
	if !l.sl.Enabled(ctx, level) {
		return
	}
	var pcs [1]uintptr
	runtime.Callers(3, pcs[:]) // the server's call site, not this adapter
	r := slog.NewRecord(time.Now(), level, msg, pcs[0])
	for _, t := range tags {
		r.AddAttrs(slog.Any(t.Key(), t.Value()))
	}
	_ = l.sl.Handler().Handle(ctx, r)
}

func (l serverLogger) Debug(msg string, tags ...tag.Tag) { l.log(slog.LevelDebug, msg, tags) }
func (l serverLogger) Info(msg string, tags ...tag.Tag)  { l.log(slog.LevelInfo, msg, tags) }
func (l serverLogger) Warn(msg string, tags ...tag.Tag)  { l.log(slog.LevelWarn, msg, tags) }
func (l serverLogger) Error(msg string, tags ...tag.Tag) { l.log(slog.LevelError, msg, tags) }

// DPanic panics only in the server's development mode, which keel never
// runs, so it is an error record.
func (l serverLogger) DPanic(msg string, tags ...tag.Tag) { l.log(slog.LevelError, msg, tags) }

func (l serverLogger) Panic(msg string, tags ...tag.Tag) {
	l.log(slog.LevelError, msg, tags)
	panic(msg)
}

// Fatal would end the whole process (the dev server lives inside keel's
// CLI, tests and benchmarks); a panic stops the failing code path the same
// way and can be recovered by Start.
func (l serverLogger) Fatal(msg string, tags ...tag.Tag) {
	l.log(slog.LevelError, msg, tags)
	for _, t := range tags {
		if t.Key() == "error" {
			msg = fmt.Sprintf("%s: %v", msg, t.Value())
		}
	}
	panic(fatalError{msg: msg})
}

// With lets the server prepend tags cheaply, as slog does with attributes.
func (l serverLogger) With(tags ...tag.Tag) serverlog.Logger {
	args := make([]any, 0, len(tags))
	for _, t := range tags {
		args = append(args, slog.Any(t.Key(), t.Value()))
	}
	return serverLogger{sl: l.sl.With(args...), level: l.level, stopping: l.stopping}
}

// levelHandler drops records below a level before they reach the wrapped
// handler, so the SDK clients built by Server.Dial are as quiet as the
// server.
type levelHandler struct {
	level slog.Leveler
	slog.Handler
}

func (h levelHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.level.Level() && h.Handler.Enabled(ctx, l)
}

func (h levelHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return levelHandler{h.level, h.Handler.WithAttrs(attrs)}
}

func (h levelHandler) WithGroup(name string) slog.Handler {
	return levelHandler{h.level, h.Handler.WithGroup(name)}
}

func sdkLogger(sl *slog.Logger, level slog.Leveler) sdklog.Logger {
	return sdklog.NewStructuredLogger(slog.New(levelHandler{level, sl.Handler()}))
}
