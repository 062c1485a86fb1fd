//go:build unix

package worker_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
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
	"github.com/keelrun/keel/server/provider/openai"
	"github.com/keelrun/keel/server/provider/scripted"
	"github.com/keelrun/keel/server/worker"
)

// The attack, on a real server: sends that name files, paths out of the
// scripts directory, devices, FIFOs (outside and inside the directory)
// and a provider the worker does not offer. Each send is refused with
// invalid_input and the same message, before a run starts; none blocks
// (the FIFO would have blocked every model turn of the old worker, so
// each send has a deadline). A script of the directory runs, and so does
// the demo with no model named.
func TestWorkerRefusesUnofferedModelsAtSend(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	t.Setenv(openai.EnvAPIKey, "")
	t.Setenv(openai.EnvBaseURL, "")
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "hello.json"), []byte(`{"turns":[{"text":["Hello ","there."]}]}`), 0o644))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "pipe.json"), 0o644))
	require.NoError(t, os.Symlink("/dev/zero", filepath.Join(dir, "zero.json")))
	outside := filepath.Join(t.TempDir(), "outside.fifo")
	require.NoError(t, syscall.Mkfifo(outside, 0o644))
	scripts, err := scripted.OpenDir(dir)
	require.NoError(t, err)
	t.Cleanup(func() { _ = scripts.Close() })
	models := worker.DefaultModels()
	models.Scripts = scripts

	srv := keeltest.StartServer(t, devserver.Config{})
	keeltest.StartWorker(t, srv, keeltest.WorkerOptions{Models: models})
	c := keeltest.Client(t, srv, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	hostile := []string{"scripted:/etc/passwd", "scripted:/etc/shadow", "scripted:../x", "scripted:/dev/zero",
		"scripted:" + outside, "scripted:" + filepath.Join(dir, "hello.json"), "scripted:pipe", "scripted:zero",
		"scripted:missing", "openai:invented", "anthropic:claude-x", "gpt"}
	var first string
	for i, spec := range hostile {
		sendCtx, cancelSend := context.WithTimeout(ctx, 30*time.Second)
		sess := c.Session("hostile-" + string(rune('a'+i)))
		_, err := sess.Send(sendCtx, "x", client.WithConfig(api.RunConfig{Model: spec}))
		blocked := sendCtx.Err()
		cancelSend()
		require.Error(t, err, "send %q", spec)
		require.NoError(t, blocked, "send %q blocked", spec)
		var ke *keel.Error
		require.True(t, errors.As(err, &ke), "send %q: %v", spec, err)
		require.Equal(t, keel.CodeInvalidInput, ke.Code, "send %q", spec)
		if first == "" {
			first = ke.Message
		}
		require.Equal(t, first, ke.Message, "the refusal of %q differs", spec)
		st, err := sess.State(ctx)
		if err == nil {
			require.Zero(t, st.Runs, "send %q started a run", spec)
		}
	}
	require.Contains(t, first, "not offered by this worker")
	require.Contains(t, first, "scripted:hello")
	require.NotContains(t, first, "pipe")

	run, err := c.Session("named-script").Send(ctx, "hi", client.WithConfig(api.RunConfig{Model: "scripted:hello"}))
	require.NoError(t, err)
	out, err := run.Outcome(ctx)
	require.NoError(t, err)
	require.Equal(t, "Hello there.", out.Text)
	run, err = c.Session("the-demo").Send(ctx, "hi")
	require.NoError(t, err)
	out, err = run.Outcome(ctx)
	require.NoError(t, err)
	require.Equal(t, keel.StatusCompleted, out.Status)

	// Around the client: a session started by hand with a file as its
	// default model is refused at its first send by the session's own
	// validator, before anything opens the file.
	tc := keeltest.Dial(t, srv)
	start := tc.NewWithStartWorkflowOperation(sdkclient.StartWorkflowOptions{ID: "direct", TaskQueue: api.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING},
		api.SessionWorkflowName, api.SessionInput{SessionID: "direct", Config: api.RunConfig{Model: "scripted:" + outside}})
	up, err := tc.UpdateWithStartWorkflow(ctx, sdkclient.UpdateWithStartWorkflowOptions{StartWorkflowOperation: start,
		UpdateOptions: sdkclient.UpdateWorkflowOptions{UpdateName: api.UpdateSend, Args: []any{api.SendRequest{Prompt: "x"}},
			WaitForStage: sdkclient.WorkflowUpdateStageCompleted}})
	if err == nil {
		err = up.Get(ctx, nil)
	}
	require.Error(t, err)
	require.Contains(t, err.Error(), "not offered by this worker")
}
