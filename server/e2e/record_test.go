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
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
	"github.com/keelrun/keel/server/tool"
)

// The recorders write the workflow histories that server/workflows/replay_test.go
// replays, from real runs on the embedded server. They run only when
// asked, because re-recording is a decision (docs/testing.md):
//
//	KEEL_RECORD=1 go test -run TestRecord ./server/e2e
const recordEnv = "KEEL_RECORD"

// skipUnlessRecording skips a recorder unless recordEnv is 1.
func skipUnlessRecording(t *testing.T) {
	t.Helper()
	if os.Getenv(recordEnv) != "1" {
		t.Skip("set " + recordEnv + "=1 to re-record server/workflows/testdata")
	}
}

// recording is what a recorder records from (recordStack).
type recording struct {
	ctx context.Context
	srv *devserver.Server
	c   *client.Client
	// data is the server's data directory (cfg.DataDir), its content
	// store in data/store; "" for a server in memory.
	data string
}

// recordStack is the start the recorders share: it skips the test unless
// recordEnv is 1, then starts an embedded server on cfg, a keel worker on
// it with opts and a client of it, with a context that ends after timeout.
func recordStack(t *testing.T, timeout time.Duration, cfg devserver.Config, opts keeltest.WorkerOptions) recording {
	t.Helper()
	skipUnlessRecording(t)
	r := recording{ctx: testContext(t, timeout), data: cfg.DataDir}
	r.srv = keeltest.StartServer(t, cfg)
	keeltest.StartWorker(t, r.srv, opts)
	r.c = keeltest.Client(t, r.srv, nil)
	return r
}

// notesTools is the built-in tools on a workspace that holds notes.txt.
func notesTools(t *testing.T) *tool.Registry {
	t.Helper()
	workspace := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(workspace, "notes.txt"), []byte("notes\n"), 0o600))
	tools, err := tool.Builtins(workspace)
	require.NoError(t, err)
	return tools
}

// TestRecordToolSamplingHistory records a run whose tool asks the run's
// model (the run's model travels with each call, and the request's usage
// is counted in the run). It writes session_tool_sampling.json.
func TestRecordToolSamplingHistory(t *testing.T) {
	type question struct {
		Prompt string `json:"prompt"`
	}
	askModel := tool.New("ask_model", "Asks the run's model one question.",
		func(ctx context.Context, q question) (string, error) {
			res, err := tool.Sample(ctx, tool.SampleRequest{Messages: []keel.Message{keel.UserMessage(q.Prompt)}, MaxTokens: 50})
			if err != nil {
				return "", err
			}
			return "the model said: " + res.Text, nil
		})
	tools, err := tool.NewRegistry(askModel)
	require.NoError(t, err)
	// The sampling request has no assistant message, so the scripted model
	// answers it with turn 1's text, as it answers the run's first turn.
	r := recordStack(t, 3*time.Minute, devserver.Config{DataDir: t.TempDir()}, keeltest.WorkerOptions{Tools: tools, Script: `{"turns":[
	  {"text":["Asking."],"tool_calls":[{"id":"a1","name":"ask_model","arguments":{"prompt":"say hi"}}],
	   "usage":{"input_tokens":12,"output_tokens":4}},
	  {"text":["Done."],"usage":{"input_tokens":30,"output_tokens":2}}]}`})
	ctx, c := r.ctx, r.c
	run, err := c.Session("replay-tool-sampling").Send(ctx, "ask it", client.WithConfig(api.RunConfig{Tools: []string{"ask_model"}}))
	require.NoError(t, err)
	out, err := run.Outcome(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, out.UsageTotal.Requests, "two model turns and the tool's sampling request")
	writeRunExecution(t, ctx, c.Temporal(), run, r.data, "session_tool_sampling.json")
}

// TestRecordCancelledStreamHistory records a run cancelled while its model
// streams (the ModelTurn activity's cancellation recorded, then the turn's
// end with its partial text), for server/workflows/replay_test.go and the cancel
// notifier's replay test in worker. It writes
// session_cancelled_stream.json.
func TestRecordCancelledStreamHistory(t *testing.T) {
	skipUnlessRecording(t)
	ctx := testContext(t, time.Minute)
	p := scriptedFaults(t, hangingStream)
	data := t.TempDir()
	srv := keeltest.StartServer(t, devserver.Config{DataDir: data})
	mem := live.NewMemory()
	t.Cleanup(func() { _ = mem.Close() })
	keeltest.StartWorker(t, srv, keeltest.WorkerOptions{Models: p, Live: mem})
	c := keeltest.Client(t, srv, mem)
	run, err := c.Session("replay-cancelled-stream").Send(ctx, "go")
	require.NoError(t, err)
	p.awaitTexts(t, ctx, 2)
	require.NoError(t, run.Cancel(ctx))
	_, err = run.Outcome(ctx)
	require.ErrorIs(t, err, keel.ErrCancelled)
	writeRunExecution(t, ctx, c.Temporal(), run, data, "session_cancelled_stream.json")
}

// writeRunExecution saves, into server/workflows/testdata/file, the execution of
// the session that ran run (the first, for a new session), with the
// content-store objects under data that it references.
func writeRunExecution(t *testing.T, ctx context.Context, tc sdkclient.Client, run *client.Run, data, file string) {
	t.Helper()
	desc, err := tc.DescribeWorkflowExecution(ctx, run.Session().ID(), "")
	require.NoError(t, err)
	dir := filepath.Join("..", "workflows", "testdata")
	writeHistoryOf(t, ctx, tc, run.Session().ID(), desc.GetWorkflowExecutionInfo().GetFirstRunId(), filepath.Join(dir, file))
	copyStore(t, filepath.Join(data, "store"), filepath.Join(dir, "store"))
}

// writeHistory saves a workflow's history as the JSON the temporal CLI
// prints and sdk worker.WorkflowReplayer reads.
func writeHistory(t *testing.T, ctx context.Context, tc sdkclient.Client, workflowID, path string) {
	t.Helper()
	writeHistoryOf(t, ctx, tc, workflowID, "", path)
}

// writeHistoryOf saves the history of one execution (runID; "" for the
// current one).
func writeHistoryOf(t *testing.T, ctx context.Context, tc sdkclient.Client, workflowID, runID, path string) {
	t.Helper()
	h := &historypb.History{}
	it := tc.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
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

// continuedAs waits for execution runID of workflowID to continue as new
// and returns the new execution's run ID; on a timeout it logs runID's
// history.
func continuedAs(t *testing.T, ctx context.Context, tc sdkclient.Client, workflowID, runID string) string {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	it := tc.GetWorkflowHistory(wctx, workflowID, runID, true, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
	ev, err := it.Next()
	if err != nil {
		all := tc.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
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
