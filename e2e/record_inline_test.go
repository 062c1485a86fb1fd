package e2e_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/devserver"
	"github.com/keelrun/keel/internal/keeltest"
	"github.com/keelrun/keel/tool"
)

// TestRecordInlineHistories records the executions of an inline session
// (one execution per run), for workflows/replay_test.go:
//
//	KEEL_RECORD=1 go test -run TestRecordInlineHistories ./e2e
//
// It writes inline_run_tools.json (run 1: a 429 and its retry, a tool
// call, the answer, the commit and the continue-as-new),
// inline_run_cancelled.json (run 2: a sleep, a prompt queued meanwhile,
// steering, an outcome update waiting, the cancel), inline_run_queued.json (run 3: the carried
// prompt) and inline_idle_move.json (an idle execution asked to move).
func TestRecordInlineHistories(t *testing.T) {
	if os.Getenv(recordEnv) != "1" {
		t.Skip("set " + recordEnv + "=1 to re-record workflows/testdata")
	}
	ctx := testContext(t, 3*time.Minute)
	data := t.TempDir()
	srv := keeltest.StartServer(t, devserver.Config{DataDir: data})
	workspace := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(workspace, "notes.txt"), []byte("notes\n"), 0o600))
	tools, err := tool.Builtins(workspace)
	require.NoError(t, err)
	keeltest.StartWorker(t, srv, keeltest.WorkerOptions{Tools: tools, Script: `{"turns":[
	  {"failures":[{"kind":"rate_limited","status":429,"retry_after":"1s"}],
	   "text":["Let me look."],"tool_calls":[{"id":"ls","name":"list_files","arguments":{}}]},
	  {"text":["The workspace holds ","notes.txt."]},
	  {"text":["Sleeping for an hour."],"tool_calls":[{"id":"nap","name":"sleep","arguments":{"seconds":3600}}]},
	  {"text":["Queued, and done."]}]}`})
	c := keeltest.Client(t, srv, nil)
	sess := c.Session("replay-inline")

	run1, err := sess.Send(ctx, "What is in the workspace?", client.WithConfig(api.RunConfig{Tools: []string{"list_files"}}))
	require.NoError(t, err)
	_, err = run1.Outcome(ctx)
	require.NoError(t, err)

	run2, err := sess.Send(ctx, "Wait for an hour.", client.WithConfig(api.RunConfig{Tools: []string{"sleep"}}))
	require.NoError(t, err)
	followRun(ctx, run2).waitFor(t, ctx, "tool.started of the sleep", sawToolStarted("sleep"))
	run3, err := sess.Send(ctx, "Then this.", client.Queue(), client.WithConfig(api.RunConfig{Tools: []string{}}))
	require.NoError(t, err)
	require.NoError(t, run2.Steer(ctx, "Never mind."))
	// A foreign client's wait for run 2's outcome, answered at its commit.
	waiting, err := c.Temporal().UpdateWorkflow(ctx, sdkclient.UpdateWorkflowOptions{
		WorkflowID: sess.ID(), UpdateName: api.UpdateOutcome, Args: []any{api.OutcomeRequest{Run: 2}},
		WaitForStage: sdkclient.WorkflowUpdateStageAccepted,
	})
	require.NoError(t, err)
	require.NoError(t, run2.Cancel(ctx))
	var o keel.Outcome
	require.NoError(t, waiting.Get(ctx, &o))
	require.Equal(t, keel.StatusCancelled, o.Status)
	_, err = run2.Outcome(ctx)
	require.ErrorIs(t, err, keel.ErrCancelled)
	_, err = run3.Outcome(ctx)
	require.NoError(t, err)

	desc, err := c.Temporal().DescribeWorkflowExecution(ctx, sess.ID(), "")
	require.NoError(t, err)
	first := desc.GetWorkflowExecutionInfo().GetFirstRunId()
	next := func(runID string) string { // waits for runID to continue as new
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		it := c.Temporal().GetWorkflowHistory(wctx, sess.ID(), runID, true, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
		ev, err := it.Next()
		if err != nil {
			all := c.Temporal().GetWorkflowHistory(ctx, sess.ID(), runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for all.HasNext() {
				e, _ := all.Next()
				t.Logf("%s %d %s", runID, e.GetEventId(), e.GetEventType())
			}
		}
		require.NoError(t, err)
		id := ev.GetWorkflowExecutionContinuedAsNewEventAttributes().GetNewExecutionRunId()
		require.NotEmpty(t, id, "execution %s continued as new", runID)
		return id
	}
	second := next(first)
	third := next(second)
	idle := next(third)
	require.NoError(t, c.Temporal().SignalWorkflow(ctx, sess.ID(), idle, api.SignalMove, nil))
	next(idle)

	dir := filepath.Join("..", "workflows", "testdata")
	for runID, file := range map[string]string{
		first: "inline_run_tools.json", second: "inline_run_cancelled.json",
		third: "inline_run_queued.json", idle: "inline_idle_move.json",
	} {
		writeHistoryOf(t, ctx, c.Temporal(), sess.ID(), runID, filepath.Join(dir, file))
	}
	// The values the histories reference (the carried state of each
	// continue-as-new), beside the others' (content-addressed: existing
	// objects are the same bytes).
	src := filepath.Join(data, "store")
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
		dst := filepath.Join(dir, "store", rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	}))
}
