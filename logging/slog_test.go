package logging_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/keelrun/keel/logging"
)

func TestSlog(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	l := logging.Slog(zap.New(core).With(zap.String("component", "mcp")))
	l.Debug("below the level")
	l.With("server", "everything").WithGroup("call").Warn("tool not offered",
		"tool", "echo", "error", errors.New("bad schema"), slog.Group("limits", "n", 3))
	l.Error("failed", "n", 1)

	all := logs.AllUntimed()
	require.Len(t, all, 2)
	require.Equal(t, zapcore.WarnLevel, all[0].Level)
	require.Equal(t, "tool not offered", all[0].Message)
	require.Equal(t, map[string]any{"component": "mcp", "server": "everything", "call.tool": "echo",
		"call.error": "bad schema", "call.limits.n": int64(3)}, all[0].ContextMap())
	require.True(t, strings.HasSuffix(all[0].Caller.File, "slog_test.go"), all[0].Caller.File)
	require.Equal(t, zapcore.ErrorLevel, all[1].Level)
	require.False(t, logging.Slog(zap.New(core)).Enabled(t.Context(), slog.LevelDebug))
}
