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
	"github.com/keelrun/keel/devserver"
	"github.com/keelrun/keel/internal/keeltest"
	"github.com/keelrun/keel/tool"
)

// TestRecordSignalLimitsHistory records a run that takes, as signals sent
// without keel's codec (as `temporal workflow signal` sends them), more
// steering than api.MaxStagedSteers while it waits for the host, then an
// answer larger than api.MaxAnswerBytes, for workflows/limits_replay_test.go:
//
//	KEEL_RECORD=1 go test -run TestRecordSignalLimitsHistory ./e2e
//
// It writes run_signal_limits.json. The committed file was recorded by the
// code before the signal limits existed, which staged every steer and
// delivered the answer: the history that replaying must keep deciding the
// same way (signal-limits version). Recorded on today's code it shows the
// limits instead (a version marker, the 33rd steer and the answer
// dropped, then a proper answer).
func TestRecordSignalLimitsHistory(t *testing.T) {
	tools, err := tool.NewRegistry(tool.AskUser())
	require.NoError(t, err)
	r := recordStack(t, 3*time.Minute, devserver.Config{}, keeltest.WorkerOptions{Tools: tools, Script: `{"turns":[
	  {"tool_calls":[{"id":"c1","name":"ask_user","arguments":{"question":"Name?"}}]},
	  {"text":["Thanks."]}]}`})
	ctx, c := r.ctx, r.c
	run, err := c.Session("replay-signal-limits").Send(ctx, "ask me",
		client.WithConfig(api.RunConfig{Tools: []string{"ask_user"}}))
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
		require.NoError(t, plain.SignalWorkflow(ctx, run.ID, "", api.UpdateSteer, api.SteerRequest{Text: "steer"}))
	}
	huge := json.RawMessage(`"` + strings.Repeat("a", api.MaxAnswerBytes) + `"`)
	require.NoError(t, plain.SignalWorkflow(ctx, run.ID, "", api.UpdateRespond,
		api.RespondRequest{RequestID: "c1/ask_user", Answer: huge}))
	// Today's code dropped the answer: the request is still open (a query
	// sees the signals applied), so answer it properly.
	st, err := run.State(ctx)
	require.NoError(t, err)
	if len(st.Requests) > 0 {
		require.NoError(t, run.Respond(ctx, "c1/ask_user", "Ann"))
	}
	_, err = run.Outcome(ctx)
	require.NoError(t, err)
	writeHistory(t, ctx, c.Temporal(), run.ID, filepath.Join("..", "workflows", "testdata", "run_signal_limits.json"))
}
