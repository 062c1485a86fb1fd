package e2e_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
	"github.com/keelrun/keel/server/tool"
)

// TestRecordSignalLimitsHistory records a run that takes, as signals sent
// without keel's codec (as `temporal workflow signal` sends them), more
// steering than api.MaxStagedSteers while it waits for the host, then an
// answer larger than api.MaxAnswerBytes. The signals go to the session
// (workflow ID = session ID). It writes session_signal_limits.json, the
// execution that ran the run: the 33rd steer and the answer dropped, then
// a proper answer, with the store objects it references.
func TestRecordSignalLimitsHistory(t *testing.T) {
	tools, err := tool.NewRegistry(tool.AskUser())
	require.NoError(t, err)
	r := recordStack(t, 3*time.Minute, devserver.Config{DataDir: t.TempDir()}, keeltest.WorkerOptions{Tools: tools, Script: `{"turns":[
	  {"tool_calls":[{"id":"c1","name":"ask_user","arguments":{"question":"Name?"}}]},
	  {"text":["Thanks."]}]}`})
	ctx, c := r.ctx, r.c
	sess := c.Session("replay-signal-limits")
	run, err := sess.Send(ctx, "ask me", client.WithConfig(api.RunConfig{Tools: []string{"ask_user"}}))
	require.NoError(t, err)
	followRun(ctx, run).waitFor(t, ctx, "host_input.requested", func(seen []keel.Envelope) bool {
		for _, ev := range seen {
			if ev.Type == keel.TypeHostInputRequested {
				return true
			}
		}
		return false
	})

	plain, err := r.srv.Dial(ctx, sdkclient.Options{})
	require.NoError(t, err)
	defer plain.Close()
	for range api.MaxStagedSteers + 1 {
		require.NoError(t, plain.SignalWorkflow(ctx, sess.ID(), "", api.UpdateSteer, api.SteerRequest{Text: "steer"}))
	}
	huge := json.RawMessage(`"` + strings.Repeat("a", api.MaxAnswerBytes) + `"`)
	require.NoError(t, plain.SignalWorkflow(ctx, sess.ID(), "", api.UpdateRespond,
		api.RespondRequest{RequestID: "c1/ask_user", Answer: huge}))
	// The limits dropped the answer: the request is still open (a query
	// sees the signals applied), so answer it properly.
	st, err := run.State(ctx)
	require.NoError(t, err)
	require.Len(t, st.Staged, api.MaxStagedSteers, "the 33rd steer is dropped")
	require.Len(t, st.Requests, 1, "the answer over the limit is dropped")
	require.NoError(t, run.Respond(ctx, "c1/ask_user", "Ann"))
	_, err = run.Outcome(ctx)
	require.NoError(t, err)
	dir := filepath.Join("..", "workflows", "testdata")
	writeHistoryOf(t, ctx, c.Temporal(), sess.ID(), runExecution(t, ctx, c.Temporal(), sess.ID(), 1), filepath.Join(dir, "session_signal_limits.json"))
	copyStore(t, filepath.Join(r.data, "store"), filepath.Join(dir, "store"))
	listStore(t, filepath.Join(r.data, "store"))
}
