package e2e_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/schedreg"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
)

// TestRecordScheduleHistories records, for server/workflows/replay_test.go, the
// ScheduledSend workflows of a schedule's firings (docs/contract.md §22):
//
//	KEEL_RECORD=1 go test -run TestRecordScheduleHistories ./server/e2e
//
// It writes, into server/workflows/testdata:
//
//	scheduled_send.json        a firing that sends its prompt (the query
//	                           handler, the SendScheduled activity)
//	scheduled_send_wait.json   a pause_on_failure firing: the send, then
//	                           AwaitScheduledRun, the run's failure,
//	                           PauseSchedule, and the workflow failing
//	scheduled_send_check.json  the check that create runs
//	schedule_registry.json     the registry's execution: the places the
//	                           two schedules took, their firings admitted
func TestRecordScheduleHistories(t *testing.T) {
	book := &keeltest.ScriptBook{}
	ok := book.Add(t, "ok", `{"repeat":true,"turns":[{"text":["done"]}]}`)
	bad := book.Add(t, "bad", `{"repeat":true,"turns":[{"failures":[{"kind":"auth","status":401}],"text":["x"]}]}`)
	r := recordStack(t, 2*time.Minute, devserver.Config{}, keeltest.WorkerOptions{Models: book})
	ctx, c := r.ctx, r.c
	every := api.ScheduleSpec{Every: keel.Duration(time.Hour)}
	dir := filepath.Join("..", "workflows", "testdata")

	// The check that create runs, as the client starts it.
	check := api.Schedule{ID: "replay-check", ScheduleSpec: every, Prompt: "Report.", Config: &api.RunConfig{Model: ok}}
	run, err := c.Temporal().ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{ID: api.ScheduleCheckIDPrefix + check.ID + ":1",
		TaskQueue: api.TaskQueue}, api.ScheduledSendWorkflowName, api.ScheduledSendInput{Schedule: check, Check: true})
	require.NoError(t, err)
	require.NoError(t, run.Get(ctx, nil))
	writeHistoryOf(t, ctx, c.Temporal(), run.GetID(), run.GetRunID(), filepath.Join(dir, "scheduled_send_check.json"))

	record := func(s api.Schedule, file string) {
		t.Helper()
		require.NoError(t, c.CreateSchedule(ctx, s))
		h := c.Schedule(s.ID)
		require.NoError(t, h.Trigger(ctx))
		var f api.ScheduleFiring
		require.Eventually(t, func() bool {
			st, err := h.Describe(ctx)
			if err != nil || len(st.Recent) == 0 || st.Recent[0].Status == api.FiringSending {
				return false
			}
			f = st.Recent[0]
			return true
		}, time.Minute, 50*time.Millisecond)
		// A firing that waits for its run is sent before it ends.
		_ = c.Temporal().GetWorkflow(ctx, f.WorkflowID, "").Get(ctx, nil)
		writeHistoryOf(t, ctx, c.Temporal(), f.WorkflowID, "", filepath.Join(dir, file))
	}
	record(api.Schedule{ID: "replay-send", ScheduleSpec: every, Prompt: "Report.", Session: "replay-send",
		Config: &api.RunConfig{Model: ok}}, "scheduled_send.json")
	record(api.Schedule{ID: "replay-wait", ScheduleSpec: every, Prompt: "Report.", Session: "replay-wait",
		PauseOnFailure: true, Config: &api.RunConfig{Model: bad}}, "scheduled_send_wait.json")
	writeHistoryOf(t, ctx, c.Temporal(), schedreg.ScheduleRegistryID, "", filepath.Join(dir, "schedule_registry.json"))
}
