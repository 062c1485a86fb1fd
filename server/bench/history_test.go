package bench_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
	"github.com/keelrun/keel/server/tool"
)

// blobBytes is what each tool call returns: 100 calls bring the context
// to about 200k tokens (four bytes a token).
const blobBytes = 8 << 10

// historyScript is a run of n model calls, each but the last reading a
// blob of blobBytes.
func historyScript(n int) string {
	var turns []string
	for i := range n - 1 {
		turns = append(turns, fmt.Sprintf(`{"text":["reading part %d"],"tool_calls":[{"id":"c%d","name":"blob","arguments":{}}]}`, i, i))
	}
	turns = append(turns, `{"text":["done"]}`)
	return `{"turns":[` + strings.Join(turns, ",") + `]}`
}

// TestHistoryGrowsLinearly checks the quality bar "100 model calls over a
// 200k-token context stay under 5 MB of history": the transcript travels by
// reference, so each call adds about the same number of bytes, whatever
// the context already holds. It runs 25, 50 and 100 calls and compares the
// history size of the execution that ran each.
func TestHistoryGrowsLinearly(t *testing.T) {
	if testing.Short() {
		t.Skip("long: 175 model calls on the embedded server")
	}
	srv := keeltest.StartServer(t, devserver.Config{})
	book := &keeltest.ScriptBook{}
	chunk := strings.Repeat("0123456789abcdef", blobBytes/16)
	reg, err := tool.NewRegistry(tool.Func("blob", "Return a large blob.", nil,
		func(context.Context, json.RawMessage) (tool.Result, error) { return tool.Result{Output: chunk}, nil }))
	require.NoError(t, err)
	keeltest.StartWorker(t, srv, keeltest.WorkerOptions{Models: book, Tools: reg})
	c := keeltest.Client(t, srv, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	sizes := map[int]int64{}
	for _, n := range []int{25, 50, 100} {
		model := book.Add(t, fmt.Sprintf("h%d", n), historyScript(n))
		run, err := c.NewSession().Send(ctx, "read everything", client.WithConfig(api.RunConfig{
			Model: model, Tools: []string{"blob"}, MaxSteps: n, CompactAt: -1}))
		require.NoError(t, err)
		out, err := run.Outcome(ctx)
		require.NoError(t, err)
		require.Equal(t, keel.StatusCompleted, out.Status)
		sizes[n] = runHistoryBytes(ctx, t, c, run)
		t.Logf("%3d model calls, context ~%d tokens: run's history %.2f MB, %.1f KB per call",
			n, n*blobBytes/4, float64(sizes[n])/(1<<20), float64(sizes[n])/float64(n)/1024)
	}
	require.Less(t, sizes[100], int64(5<<20), "100 model calls over ~200k tokens must stay under 5 MB")
	// Linear: doubling the calls about doubles the bytes (quadratic growth
	// would quadruple them).
	ratio := float64(sizes[100]) / float64(sizes[50])
	require.InDelta(t, 2.0, ratio, 0.3, "history from 50 to 100 calls grew %.2fx", ratio)
}

// runHistoryBytes is the history size of the execution that ran a new
// session's first run: the session's first execution (each run of a
// session commits in an execution of its own).
func runHistoryBytes(ctx context.Context, t *testing.T, c *client.Client, run *client.Run) int64 {
	t.Helper()
	tc := c.Temporal()
	id := run.Session().ID()
	d, err := tc.DescribeWorkflowExecution(ctx, id, "")
	if err == nil {
		d, err = tc.DescribeWorkflowExecution(ctx, id, d.GetWorkflowExecutionInfo().GetFirstRunId())
	}
	require.NoError(t, err)
	return d.GetWorkflowExecutionInfo().GetHistorySizeBytes()
}
