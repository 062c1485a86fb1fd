package e2e_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
)

// TestRecordForkHistories records, for server/workflows/replay_test.go, the
// executions of a fork and of a rewind (docs/contract.md §19):
//
//	KEEL_RECORD=1 go test -run TestRecordForkHistories ./server/e2e
//
// It writes server/workflows/testdata/session_fork.json (a session started as a
// fork of another at its run 1: session.forked, then its own run 1 and
// the continue-as-new) and session_rewind.json (the source's execution
// after its run 1: the rewind update back to run 0, then run 2 and the
// continue-as-new), and the store objects they reference.
func TestRecordForkHistories(t *testing.T) {
	r := recordStack(t, 2*time.Minute, devserver.Config{DataDir: t.TempDir()}, keeltest.WorkerOptions{Script: `{"repeat":true,"turns":[{"text":["Brief."]}]}`})
	ctx, c, data := r.ctx, r.c, r.data
	noTools := client.WithConfig(api.RunConfig{Tools: []string{}})
	src := c.Session("replay-fork-source")

	run1, err := src.Send(ctx, "First.", noTools)
	require.NoError(t, err)
	_, err = run1.Outcome(ctx)
	require.NoError(t, err)
	fork, _, err := src.Fork(ctx, api.Point{Run: 1}, "replay-fork")
	require.NoError(t, err)
	forked, err := fork.Send(ctx, "On the fork.", noTools)
	require.NoError(t, err)
	_, err = forked.Outcome(ctx)
	require.NoError(t, err)

	_, err = src.Rewind(ctx, api.Point{Run: 0})
	require.NoError(t, err)
	run2, err := src.Send(ctx, "After the rewind.", noTools)
	require.NoError(t, err)
	_, err = run2.Outcome(ctx)
	require.NoError(t, err)

	dir := filepath.Join("..", "workflows", "testdata")
	writeHistoryOf(t, ctx, c.Temporal(), fork.ID(), runExecution(t, ctx, c.Temporal(), fork.ID(), 1), filepath.Join(dir, "session_fork.json"))
	writeHistoryOf(t, ctx, c.Temporal(), src.ID(), runExecution(t, ctx, c.Temporal(), src.ID(), 2), filepath.Join(dir, "session_rewind.json"))
	copyStore(t, filepath.Join(data, "store"), filepath.Join(dir, "store"))
	t.Logf("store objects in %s", filepath.Join(data, "store"))
	listStore(t, filepath.Join(data, "store"))
}

// listStore logs the objects of a store directory, relative to it, so the
// recording's own objects can be told from others.
func listStore(t *testing.T, dir string) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err == nil {
			t.Logf("object %s", rel)
		}
		return err
	}))
}
