package workflows_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/keelrun/keel/activities"
	"github.com/keelrun/keel/api"
)

// A run recorded before the signal limits existed took 33 steer signals
// and a respond signal over api.MaxAnswerBytes, staged every steer and
// delivered the answer (e2e TestRecordSignalLimitsHistory, on the code of
// that time). Signal handlers run again on replay, so today's code must
// decide the same: without the signal-limits version it would drop the
// answer, keep waiting for the host and schedule no model turn where the
// history has one, a nondeterminism error.
func TestReplaySignalLimitsHistory(t *testing.T) {
	h := recordedHistory{file: "run_signal_limits.json", workflowType: api.RunWorkflowName, atLeast: map[string]int{
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED.String():  api.MaxStagedSteers + 2,
		activities.ModelTurnName:                                 2,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED.String(): 1,
	}}
	path := filepath.Join("testdata", h.file)
	requireCoverage(t, path, h)
	require.NoError(t, replayHistory(path, storeCopy(t)))
}
