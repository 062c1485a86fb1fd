package e2e_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/devserver"
	"github.com/keelrun/keel/internal/keeltest"
	"github.com/keelrun/keel/tool"
	"github.com/keelrun/keel/workflows"
)

// TestRecordHistories records the workflow histories that
// workflows/replay_test.go replays, from real runs on the embedded server.
// It runs only when asked, because re-recording is a decision (see
// docs/testing.md):
//
//	KEEL_RECORD=1 go test -run TestRecordHistories ./e2e
//
// It writes, into workflows/testdata:
//
//	session.json         the Session workflow after its two runs
//	run_tool_retry.json  run 1: a 429 with Retry-After, the retry, a tool call
//	run_cancelled.json   run 2: cancelled while its sleep tool waits
const recordEnv = "KEEL_RECORD"

// recordScript plays both runs of the recorded session.
const recordScript = `{"turns":[
  {"failures":[{"kind":"rate_limited","status":429,"retry_after":"1s"}],
   "text":["Let me look."],"tool_calls":[{"id":"ls","name":"list_files","arguments":{}}],
   "usage":{"input_tokens":12,"output_tokens":4}},
  {"text":["The workspace holds ","notes.txt."],"usage":{"input_tokens":30,"output_tokens":6}},
  {"text":["Sleeping for an hour."],"tool_calls":[{"id":"nap","name":"sleep","arguments":{"seconds":3600}}]}
]}`

func TestRecordHistories(t *testing.T) {
	if os.Getenv(recordEnv) != "1" {
		t.Skip("set " + recordEnv + "=1 to re-record workflows/testdata")
	}
	ctx := testContext(t, 3*time.Minute)
	srv := keeltest.StartServer(t, devserver.Config{})
	workspace := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(workspace, "notes.txt"), []byte("notes\n"), 0o600))
	tools, err := tool.Builtins(workspace)
	require.NoError(t, err)
	keeltest.StartWorker(t, srv, keeltest.WorkerOptions{Script: recordScript, Tools: tools})
	c := keeltest.Client(t, srv, nil)
	sess := c.Session("replay")

	run1, err := sess.Send(ctx, "What is in the workspace?",
		client.WithConfig(workflows.RunConfig{Tools: []string{"list_files"}}))
	require.NoError(t, err)
	out1, err := run1.Outcome(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, out1.UsageTotal.Requests, "run 1 made the 429 request, its retry and the final turn")

	run2, err := sess.Send(ctx, "Wait for an hour.", client.WithConfig(workflows.RunConfig{Tools: []string{"sleep"}}))
	require.NoError(t, err)
	followRun(ctx, run2).waitFor(t, ctx, "tool.started of the sleep", sawToolStarted("sleep"))
	require.NoError(t, run2.Cancel(ctx))
	_, err = run2.Outcome(ctx)
	require.ErrorIs(t, err, keel.ErrCancelled)

	dir := filepath.Join("..", "workflows", "testdata")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for id, file := range map[string]string{
		sess.ID(): "session.json",
		run1.ID:   "run_tool_retry.json",
		run2.ID:   "run_cancelled.json",
	} {
		writeHistory(t, ctx, c.Temporal(), id, filepath.Join(dir, file))
	}
}

// writeHistory saves a workflow's history as the JSON the temporal CLI
// prints and sdk worker.WorkflowReplayer reads.
func writeHistory(t *testing.T, ctx context.Context, tc sdkclient.Client, workflowID, path string) {
	t.Helper()
	h := &historypb.History{}
	it := tc.GetWorkflowHistory(ctx, workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		h.Events = append(h.Events, ev)
	}
	data, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(h)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, append(data, '\n'), 0o644))
	t.Logf("wrote %s: %d events of %s", path, len(h.Events), workflowID)
}
