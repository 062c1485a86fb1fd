package e2e_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
	"github.com/keelrun/keel/server/store"
	"github.com/keelrun/keel/server/store/storetest"
	"github.com/keelrun/keel/server/tool"
	"github.com/keelrun/keel/server/worker"
)

// flakyS3 is a real S3-protocol server (gofakes3) that can refuse every
// request, as an unreachable bucket would.
type flakyS3 struct {
	down    atomic.Bool
	refused atomic.Int64
	// refusedSome is closed at the third refused request.
	refusedSome chan struct{}
	url         string
}

func startFlakyS3(t *testing.T) *flakyS3 {
	t.Helper()
	f := &flakyS3{refusedSome: make(chan struct{})}
	_, _, f.url = storetest.S3(t, func(s3 http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if f.down.Load() {
				if f.refused.Add(1) == 3 {
					close(f.refusedSome)
				}
				// Hang up without an answer, as a dead endpoint does.
				if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
					_ = conn.Close()
				}
				return
			}
			s3.ServeHTTP(w, r)
		})
	})
	return f
}

// A content store that is unreachable while a tool's 64 KiB result is to
// be stored fails the activity with a clear error; Temporal retries it, and
// once the store is back the run completes with the whole result: nothing
// dropped, nothing passed through half-encoded.
func TestStoreDownDuringRun(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	s3 := startFlakyS3(t)
	st, err := store.Open(ctx, s3.url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	codec := store.NewCodec(st, store.CodecOptions{Timeout: 5 * time.Second})
	dc := store.NewDataConverter(codec)

	srv := keeltest.StartServer(t, devserver.Config{})
	workspace := t.TempDir()
	big := strings.Repeat("0123456789abcdef", 4096)
	require.NoError(t, os.WriteFile(filepath.Join(workspace, "big.txt"), []byte(big), 0o600))
	// The tool takes the store down just before it returns, so storing its
	// result is the first write that fails.
	readThenFail := tool.New("read_big", "Read big.txt.", func(ctx context.Context, _ struct{}) (string, error) {
		b, err := os.ReadFile(filepath.Join(workspace, "big.txt"))
		if s3.refused.Load() == 0 {
			s3.down.Store(true)
		}
		return string(b), err
	})
	tools, err := tool.NewRegistry(readThenFail)
	require.NoError(t, err)
	tc, err := srv.Dial(ctx, sdkclient.Options{DataConverter: dc})
	require.NoError(t, err)
	t.Cleanup(tc.Close)
	w, err := worker.New(tc, worker.Options{Models: keeltest.ScriptModels(t, `{"turns":[
	  {"tool_calls":[{"id":"r","name":"read_big","arguments":{}}]},{"text":["read it"]}]}`),
		Tools: tools, Codec: codec, StopTimeout: time.Second})
	require.NoError(t, err)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	c, err := client.Dial(ctx, client.Options{Temporal: tc, DataConverter: dc,
		Config: api.RunConfig{Tools: []string{"read_big"}}})
	require.NoError(t, err)
	run, err := c.Session("store-down").Send(ctx, "read")
	require.NoError(t, err)

	// The store is down from the tool's return until it has refused a few
	// requests: the activity's result could not be stored, so it failed.
	select {
	case <-s3.refusedSome:
	case <-ctx.Done():
		t.Fatal("the store was never asked while down")
	}
	s3.down.Store(false)

	out, err := run.Outcome(ctx)
	require.NoError(t, err)
	require.Equal(t, "read it", out.Text)
	log, err := c.Session("store-down").EventsAfter(ctx, 0)
	require.NoError(t, err)
	requireSessionLog(t, log)
	var finished []keel.ToolFinished
	for _, ev := range log {
		if ev.Type == keel.TypeToolFinished {
			finished = append(finished, decode[keel.ToolFinished](ev))
		}
	}
	require.Len(t, finished, 1)
	require.Equal(t, keel.ToolOK, finished[0].Status)
	require.Equal(t, big, finished[0].Output, "the result is whole")
	// The first attempt of the tool's activity failed on the store; its
	// retry stored the result. The run executed in the session's first
	// execution (an inline session: one execution per run).
	attempts := int32(0)
	execution := runExecution(t, ctx, tc, run.Session().ID(), run.Number)
	it := tc.GetWorkflowHistory(ctx, run.Session().ID(), execution, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil {
			attempts = max(attempts, a.GetAttempt())
		}
	}
	require.GreaterOrEqual(t, attempts, int32(2), "an activity was retried after the store failed")
	t.Logf("the store refused %d requests while down; the tool's activity ran %d times", s3.refused.Load(), attempts)
}
