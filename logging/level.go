package logging

import (
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// AtLeast returns l writing only records that level enables as well, so
// a chatty component (the embedded Temporal server) can be quieter than
// the rest of the sink.
func AtLeast(l *zap.Logger, level zapcore.LevelEnabler) *zap.Logger {
	return l.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return levelCore{Core: c, level: level} }))
}

// levelCore drops records below its level before the wrapped core sees them.
type levelCore struct {
	zapcore.Core
	level zapcore.LevelEnabler
}

func (c levelCore) Enabled(l zapcore.Level) bool {
	return c.level.Enabled(l) && c.Core.Enabled(l)
}

func (c levelCore) With(fields []zapcore.Field) zapcore.Core {
	return levelCore{Core: c.Core.With(fields), level: c.level}
}

func (c levelCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if !c.level.Enabled(e.Level) {
		return ce
	}
	return c.Core.Check(e, ce)
}
