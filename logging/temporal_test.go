package logging_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	sdklog "go.temporal.io/sdk/log"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/logging"
)

func TestTemporalKeyValues(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	l := logging.Temporal(zap.New(core))
	w := sdklog.With(l, "WorkflowID", keel.RunID("s7", 4), "Attempt", 2)
	w.Warn("activity failed", "Error", errors.New("boom"), 17, "odd", "lonely")
	l.Debug("plain")

	all := logs.AllUntimed()
	require.Len(t, all, 2)
	got := all[0].ContextMap()
	require.Equal(t, "s7", got["session_id"])
	require.Equal(t, "s7/run-4", got["run_id"])
	require.Equal(t, keel.RunID("s7", 4), got["WorkflowID"])
	require.EqualValues(t, 2, got["Attempt"])
	require.Equal(t, "boom", got["Error"])
	require.Equal(t, "odd", got["!badkey(17)"])
	require.Equal(t, "lonely", got["!missing"])
	require.Equal(t, zapcore.WarnLevel, all[0].Level)
	require.Equal(t, "plain", all[1].Message)
	require.Empty(t, all[1].Context)
}
