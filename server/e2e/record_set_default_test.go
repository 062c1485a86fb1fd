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

// TestRecordSetDefaultHistory records, for server/workflows/replay_test.go, the
// execution of an inline session whose run was sent with set_default
// (docs/contract.md §11.6): the set-default version marker, the run under
// the send's config, and the continue-as-new handing the new defaults on.
//
//	KEEL_RECORD=1 go test -run TestRecordSetDefaultHistory ./server/e2e
//
// It writes server/workflows/testdata/session_set_default.json and the store
// objects it references.
func TestRecordSetDefaultHistory(t *testing.T) {
	r := recordStack(t, 2*time.Minute, devserver.Config{DataDir: t.TempDir()}, keeltest.WorkerOptions{Script: `{"repeat":true,"turns":[{"text":["Brief."]}]}`})
	ctx, c, data := r.ctx, r.c, r.data
	sess := c.Session("replay-set-default")

	run1, err := sess.Send(ctx, "Set the tone.", client.SetDefault(),
		client.WithConfig(api.RunConfig{System: "Be brief.", Tools: []string{}}))
	require.NoError(t, err)
	_, err = run1.Outcome(ctx)
	require.NoError(t, err)
	first := runExecution(t, ctx, c.Temporal(), sess.ID(), 1)

	dir := filepath.Join("..", "workflows", "testdata")
	writeHistoryOf(t, ctx, c.Temporal(), sess.ID(), first, filepath.Join(dir, "session_set_default.json"))
	copyStore(t, filepath.Join(data, "store"), filepath.Join(dir, "store"))
}

// copyStore copies the content-store objects under src into dst
// (content-addressed: an object already there is the same bytes).
func copyStore(t *testing.T, src, dst string) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	}))
}
