package e2e_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
)

// TestRecordSessionHistories records the executions of a session (one
// execution per run), for server/workflows/replay_test.go:
//
//	KEEL_RECORD=1 go test -run TestRecordSessionHistories ./server/e2e
//
// It writes session_run_tools.json (run 1: a 429 and its retry, a tool
// call, the answer, the commit and the continue-as-new),
// session_run_cancelled.json (run 2: a sleep, a prompt queued meanwhile,
// steering, an outcome update waiting, the cancel), session_run_queued.json (run 3: the carried
// prompt) and session_idle_move.json (an idle execution asked to move).
func TestRecordSessionHistories(t *testing.T) {
	r := recordStack(t, 3*time.Minute, devserver.Config{DataDir: t.TempDir()}, keeltest.WorkerOptions{Tools: notesTools(t), Script: `{"turns":[
	  {"failures":[{"kind":"rate_limited","status":429,"retry_after":"1s"}],
	   "text":["Let me look."],"tool_calls":[{"id":"ls","name":"list_files","arguments":{}}]},
	  {"text":["The workspace holds ","notes.txt."]},
	  {"text":["Sleeping for an hour."],"tool_calls":[{"id":"nap","name":"sleep","arguments":{"seconds":3600}}]},
	  {"text":["Queued, and done."]}]}`})
	ctx, c := r.ctx, r.c
	sess := c.Session("replay-session")

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
	next := func(runID string) string { return continuedAs(t, ctx, c.Temporal(), sess.ID(), runID) }
	second := next(first)
	third := next(second)
	idle := next(third)
	require.NoError(t, c.Temporal().SignalWorkflow(ctx, sess.ID(), idle, api.SignalMove, nil))
	next(idle)

	dir := filepath.Join("..", "workflows", "testdata")
	for runID, file := range map[string]string{
		first: "session_run_tools.json", second: "session_run_cancelled.json",
		third: "session_run_queued.json", idle: "session_idle_move.json",
	} {
		writeHistoryOf(t, ctx, c.Temporal(), sess.ID(), runID, filepath.Join(dir, file))
	}
	// The values the histories reference (the carried state of each
	// continue-as-new), beside the others' (content-addressed: existing
	// objects are the same bytes).
	copyStore(t, filepath.Join(r.data, "store"), filepath.Join(dir, "store"))
}
