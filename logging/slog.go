package logging

import (
	"context"
	"log/slog"
	"runtime"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Slog returns l as an *slog.Logger, for libraries that take one (keel's
// MCP client), so their records reach the same sink. slog's levels map to
// zap's (below Info is Debug, at or above Error is Error); groups prefix
// their attributes' keys ("group.key").
func Slog(l *zap.Logger) *slog.Logger {
	return slog.New(&slogHandler{core: l.Core()})
}

type slogHandler struct {
	core   zapcore.Core
	prefix string // the open groups, each followed by "."
}

func zapLevel(l slog.Level) zapcore.Level {
	switch {
	case l < slog.LevelInfo:
		return zapcore.DebugLevel
	case l < slog.LevelWarn:
		return zapcore.InfoLevel
	case l < slog.LevelError:
		return zapcore.WarnLevel
	}
	return zapcore.ErrorLevel
}

func (h *slogHandler) Enabled(_ context.Context, l slog.Level) bool {
	return h.core.Enabled(zapLevel(l))
}

func (h *slogHandler) Handle(_ context.Context, r slog.Record) error {
	ent := zapcore.Entry{Level: zapLevel(r.Level), Time: r.Time, Message: r.Message}
	if ent.Time.IsZero() {
		ent.Time = time.Now()
	}
	if r.PC != 0 {
		f, _ := runtime.CallersFrames([]uintptr{r.PC}).Next()
		ent.Caller = zapcore.NewEntryCaller(r.PC, f.File, f.Line, true)
	}
	ce := h.core.Check(ent, nil)
	if ce == nil {
		return nil
	}
	fields := make([]zap.Field, 0, r.NumAttrs())
	r.Attrs(func(a slog.Attr) bool {
		fields = appendAttr(fields, h.prefix, a)
		return true
	})
	ce.Write(fields...)
	return nil
}

func (h *slogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	fields := make([]zap.Field, 0, len(attrs))
	for _, a := range attrs {
		fields = appendAttr(fields, h.prefix, a)
	}
	return &slogHandler{core: h.core.With(fields), prefix: h.prefix}
}

func (h *slogHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return &slogHandler{core: h.core, prefix: h.prefix + name + "."}
}

// appendAttr adds a as fields, flattening groups into prefixed keys.
func appendAttr(fields []zap.Field, prefix string, a slog.Attr) []zap.Field {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		inner := prefix
		if a.Key != "" {
			inner += a.Key + "."
		}
		for _, g := range v.Group() {
			fields = appendAttr(fields, inner, g)
		}
		return fields
	}
	if a.Key == "" {
		return fields
	}
	return append(fields, zap.Any(prefix+a.Key, v.Any()))
}
