package e2e_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
)

// TestRecordOnceHistories records a session's sends under a key
// (docs/contract.md §11.7), for server/workflows/replay_test.go:
//
//	KEEL_RECORD=1 go test -run TestRecordOnceHistories ./server/e2e
//
// It writes session_once_sent.json (run 1 sent under the key "firing-1",
// the key carried in the continue-as-new) and session_once_repeated.json
// (the third execution: the same key sent again, answered with run 1
// and starting nothing, then run 3).
func TestRecordOnceHistories(t *testing.T) {
	r := recordStack(t, 3*time.Minute, devserver.Config{DataDir: t.TempDir()},
		keeltest.WorkerOptions{Script: `{"repeat":true,"turns":[{"text":["done"]}]}`})
	ctx, c := r.ctx, r.c
	sess := c.Session("replay-once")
	run1, err := sess.SendOnce(ctx, "firing-1", "Report.")
	require.NoError(t, err)
	_, err = run1.Outcome(ctx)
	require.NoError(t, err)
	run2, err := sess.Send(ctx, "Another.")
	require.NoError(t, err)
	_, err = run2.Outcome(ctx)
	require.NoError(t, err)
	again, err := sess.SendOnce(ctx, "firing-1", "Report.")
	require.NoError(t, err)
	require.True(t, again.Repeated)
	require.Equal(t, 1, again.Number)
	run3, err := sess.Send(ctx, "Last.")
	require.NoError(t, err)
	_, err = run3.Outcome(ctx)
	require.NoError(t, err)

	desc, err := c.Temporal().DescribeWorkflowExecution(ctx, sess.ID(), "")
	require.NoError(t, err)
	next := func(runID string) string { return continuedAs(t, ctx, c.Temporal(), sess.ID(), runID) }
	first := desc.GetWorkflowExecutionInfo().GetFirstRunId()
	third := next(next(first))
	next(third)
	dir := filepath.Join("..", "workflows", "testdata")
	writeHistoryOf(t, ctx, c.Temporal(), sess.ID(), first, filepath.Join(dir, "session_once_sent.json"))
	writeHistoryOf(t, ctx, c.Temporal(), sess.ID(), third, filepath.Join(dir, "session_once_repeated.json"))
	copyStore(t, filepath.Join(r.data, "store"), filepath.Join(dir, "store"))
}
