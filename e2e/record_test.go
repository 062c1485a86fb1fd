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
	"github.com/keelrun/keel/devserver"
	"github.com/keelrun/keel/internal/keeltest"
	"github.com/keelrun/keel/store"
	"github.com/keelrun/keel/tool"
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

// skipUnlessRecording skips a recorder unless recordEnv is 1.
func skipUnlessRecording(t *testing.T) {
	t.Helper()
	if os.Getenv(recordEnv) != "1" {
		t.Skip("set " + recordEnv + "=1 to re-record workflows/testdata")
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

func TestRecordHistories(t *testing.T) {
	r := recordStack(t, 3*time.Minute, devserver.Config{}, keeltest.WorkerOptions{Script: recordScript, Tools: notesTools(t)})
	ctx, c := r.ctx, r.c
	sess := c.Session("replay")

	run1, err := sess.Send(ctx, "What is in the workspace?",
		client.WithConfig(api.RunConfig{Tools: []string{"list_files"}}))
	require.NoError(t, err)
	out1, err := run1.Outcome(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, out1.UsageTotal.Requests, "run 1 made the 429 request, its retry and the final turn")

	run2, err := sess.Send(ctx, "Wait for an hour.", client.WithConfig(api.RunConfig{Tools: []string{"sleep"}}))
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

// TestRecordSendAtStartHistory records a session whose sends return once
// the run's start is asked for (the send-at-start version), for
// workflows/replay_test.go:
//
//	KEEL_RECORD=1 go test -run TestRecordSendAtStartHistory ./e2e
//
// It writes session_send_at_start.json: two runs, one after the other.
func TestRecordSendAtStartHistory(t *testing.T) {
	recordTwoRunSession(t, "replay-send-at-start", "session_send_at_start.json")
}

// recordTwoRunSession records into workflows/testdata/file the history of
// a session that runs two prompts, one after the other, on a scripted
// model that answers "Done.".
func recordTwoRunSession(t *testing.T, sessionID, file string) {
	t.Helper()
	r := recordStack(t, 3*time.Minute, devserver.Config{}, keeltest.WorkerOptions{Script: `{"repeat":true,"turns":[{"text":["Done."]}]}`})
	ctx, c := r.ctx, r.c
	sess := c.Session(sessionID)
	for _, prompt := range []string{"first", "second"} {
		run, err := sess.Send(ctx, prompt)
		require.NoError(t, err)
		_, err = run.Outcome(ctx)
		require.NoError(t, err)
	}
	writeHistory(t, ctx, c.Temporal(), sess.ID(), filepath.Join("..", "workflows", "testdata", file))
}

// TestRecordRunPriorityHistory records a session that gives its runs
// their own priority (the run-priority version), for
// workflows/replay_test.go:
//
//	KEEL_RECORD=1 go test -run TestRecordRunPriorityHistory ./e2e
//
// It writes session_run_priority.json: two runs, one after the other.
func TestRecordRunPriorityHistory(t *testing.T) {
	recordTwoRunSession(t, "replay-run-priority", "session_run_priority.json")
}

// TestRecordToolSamplingHistory records a run whose tool asks the run's
// model (the tool-sampling version: the run's model travels with each
// call, and the request's usage is counted in the run), for
// workflows/replay_test.go:
//
//	KEEL_RECORD=1 go test -run TestRecordToolSamplingHistory ./e2e
//
// It writes run_tool_sampling.json.
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
	r := recordStack(t, 3*time.Minute, devserver.Config{}, keeltest.WorkerOptions{Tools: tools, Script: `{"turns":[
	  {"text":["Asking."],"tool_calls":[{"id":"a1","name":"ask_model","arguments":{"prompt":"say hi"}}],
	   "usage":{"input_tokens":12,"output_tokens":4}},
	  {"text":["Done."],"usage":{"input_tokens":30,"output_tokens":2}}]}`})
	ctx, c := r.ctx, r.c
	run, err := c.Session("replay-tool-sampling").Send(ctx, "ask it", client.WithConfig(api.RunConfig{Tools: []string{"ask_model"}}))
	require.NoError(t, err)
	out, err := run.Outcome(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, out.UsageTotal.Requests, "two model turns and the tool's sampling request")
	writeHistory(t, ctx, c.Temporal(), run.ID, filepath.Join("..", "workflows", "testdata", "run_tool_sampling.json"))
}

// TestRecordCancelledStreamHistory records a run cancelled while its model
// streams (the ModelTurn activity's cancellation recorded, then the turn's
// end with its partial text), for workflows/replay_test.go and the cancel
// notifier's replay test in worker:
//
//	KEEL_RECORD=1 go test -run TestRecordCancelledStreamHistory ./e2e
//
// It writes run_cancelled_stream.json.
func TestRecordCancelledStreamHistory(t *testing.T) {
	skipUnlessRecording(t)
	ctx := testContext(t, time.Minute)
	p := scriptedFaults(t, hangingStream)
	c, _ := faultsStack(t, p)
	run, err := c.Session("replay-cancelled-stream").Send(ctx, "go")
	require.NoError(t, err)
	p.awaitTexts(t, ctx, 2)
	require.NoError(t, run.Cancel(ctx))
	_, err = run.Outcome(ctx)
	require.ErrorIs(t, err, keel.ErrCancelled)
	writeHistory(t, ctx, c.Temporal(), run.ID, filepath.Join("..", "workflows", "testdata", "run_cancelled_stream.json"))
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

// TestRecordHandOverHistories records the histories of a session that
// hands over, for workflows/replay_test.go, with the content-store objects
// they reference (workflows/testdata/store):
//
//	KEEL_RECORD=1 go test -run TestRecordHandOverHistories ./e2e
//
// It writes session_handover_1.json (the first execution: a run, a prompt
// queued during it, the segment write, the continue-as-new) and
// session_handover_2.json (the next: the carried prompt's run, then its
// own hand-over).
func TestRecordHandOverHistories(t *testing.T) {
	r := recordStack(t, 3*time.Minute, devserver.Config{DataDir: t.TempDir()}, keeltest.WorkerOptions{Script: `{"repeat":true,"turns":[
	  {"tool_calls":[{"id":"ls","name":"list_files","arguments":{}}]},
	  {"text":["The workspace holds notes.txt."]}]}`, Tools: notesTools(t)})
	ctx := r.ctx
	// A client of its own: one that hands over after every run.
	c, err := client.Dial(ctx, client.Options{Temporal: keeltest.Dial(t, r.srv),
		DataConverter: store.NewDataConverter(keeltest.Codec(t, r.srv)),
		Config:        api.RunConfig{Tools: []string{"list_files"}},
		HandOver:      api.HandOverLimits{Events: 1}})
	require.NoError(t, err)
	sess := c.Session("replay-handover")

	desc := func() string {
		d, err := c.Temporal().DescribeWorkflowExecution(ctx, sess.ID(), "")
		require.NoError(t, err)
		return d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	}
	run1, err := sess.Send(ctx, "What is in the workspace?")
	require.NoError(t, err)
	first := desc()
	run2, err := sess.Send(ctx, "And now?", client.Queue())
	require.NoError(t, err)
	for _, r := range []*client.Run{run1, run2} {
		_, err := r.Outcome(ctx)
		require.NoError(t, err)
	}
	st, err := sess.State(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, st.HandOvers, "a hand-over after each run")

	// The executions in order, from the first one's continue-as-new.
	second := continuedAsNew(t, ctx, c.Temporal(), sess.ID(), first)
	dir := filepath.Join("..", "workflows", "testdata")
	writeHistoryOf(t, ctx, c.Temporal(), sess.ID(), first, filepath.Join(dir, "session_handover_1.json"))
	writeHistoryOf(t, ctx, c.Temporal(), sess.ID(), second, filepath.Join(dir, "session_handover_2.json"))

	// The values the histories reference, for the replayer's codec.
	objects := filepath.Join(dir, "store")
	require.NoError(t, os.RemoveAll(objects))
	require.NoError(t, os.CopyFS(objects, os.DirFS(filepath.Join(r.data, "store"))))
}

// continuedAsNew returns the run ID the execution runID continued as.
func continuedAsNew(t *testing.T, ctx context.Context, tc sdkclient.Client, workflowID, runID string) string {
	t.Helper()
	it := tc.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
	ev, err := it.Next()
	require.NoError(t, err)
	next := ev.GetWorkflowExecutionContinuedAsNewEventAttributes().GetNewExecutionRunId()
	require.NotEmpty(t, next, "execution %s continued as new", runID)
	return next
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
