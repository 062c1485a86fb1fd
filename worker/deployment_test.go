package worker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	sdkclient "go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/devserver"
	"github.com/keelrun/keel/internal/keeltest"
	"github.com/keelrun/keel/tool"
	"github.com/keelrun/keel/worker"
)

// A rolling upgrade on a real server: build v1 is current, a session's
// run waits for host input, build v2 starts and becomes current. The run
// in flight stays on v1 (its model turn after the answer is v1's: the
// session's execution is pinned), the session's next execution starts on
// v2, and its next run runs there.
func TestRollingUpgradePinsRunsAndMovesSessions(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	const deployment = "keel-rollout"
	srv := keeltest.StartServer(t, devserver.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tc := keeltest.Dial(t, srv)

	// Both builds play the same model spec; each answers in its own words,
	// so an answer says which build ran the turn. Turn 0 asks the host.
	script := func(build string) string {
		return `{"turns":[
		  {"tool_calls":[{"id":"q","name":"ask_user","arguments":{"question":"Go on?"}}]},
		  {"text":["run 1 answered by ` + build + `"]},
		  {"text":["run 2 answered by ` + build + `"]}]}`
	}
	startBuild(t, srv, deployment, "v1", script("v1"))
	setCurrent(t, ctx, tc, deployment, "v1")

	kc := keeltest.Client(t, srv, nil)
	sess := kc.Session("rollout")
	cfg := client.WithConfig(api.RunConfig{Model: "scripted:rollout", Tools: []string{tool.NativeAskUser}})
	run1, err := sess.Send(ctx, "first", cfg)
	require.NoError(t, err)
	requestID := waitForHostInput(t, ctx, run1)
	requireVersion(t, ctx, tc, sess.ID(), enumspb.VERSIONING_BEHAVIOR_PINNED, "v1")

	startBuild(t, srv, deployment, "v2", script("v2"))
	setCurrent(t, ctx, tc, deployment, "v2")

	require.NoError(t, run1.Respond(ctx, requestID, "yes"))
	out, err := run1.Outcome(ctx)
	require.NoError(t, err)
	require.Equal(t, "run 1 answered by v1", out.Text, "the run in flight left the build that started it")

	run2, err := sess.Send(ctx, "second", cfg)
	require.NoError(t, err)
	out, err = run2.Outcome(ctx)
	require.NoError(t, err)
	require.Equal(t, "run 2 answered by v2", out.Text, "a new run did not start on the current build")
	// The next execution starts auto-upgrading onto v2 and is pinned there
	// once its first workflow task completed.
	require.Eventually(t, func() bool {
		desc, err := tc.DescribeWorkflowExecution(ctx, sess.ID(), "")
		info := desc.GetWorkflowExecutionInfo().GetVersioningInfo()
		return err == nil && info.GetBehavior() == enumspb.VERSIONING_BEHAVIOR_PINNED &&
			info.GetDeploymentVersion().GetBuildId() == "v2"
	}, time.Minute, 20*time.Millisecond, "the session's next execution is pinned to v2")
}

// startBuild starts a worker that is build buildID of deployment, playing
// script for the model spec "scripted:rollout".
func startBuild(t *testing.T, srv *devserver.Server, deployment, buildID, script string) sdkworker.Worker {
	t.Helper()
	var book keeltest.ScriptBook
	book.Add(t, "rollout", script)
	tools, err := tool.Builtins(t.TempDir())
	require.NoError(t, err)
	w, err := worker.New(keeltest.Dial(t, srv), worker.Options{
		Models: &book, Tools: tools, Codec: keeltest.Codec(t, srv), StopTimeout: time.Second,
		Deployment: deployment, BuildID: buildID,
	})
	require.NoError(t, err)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	return w
}

// setCurrent makes buildID the deployment's current version, as an
// operator does once the build's workers poll. The server refuses while
// it has not yet seen them poll every task queue of the current version,
// so it retries on that refusal only.
func setCurrent(t *testing.T, ctx context.Context, tc sdkclient.Client, deployment, buildID string) {
	t.Helper()
	h := tc.WorkerDeploymentClient().GetHandle(deployment)
	retry := time.NewTicker(100 * time.Millisecond)
	defer retry.Stop()
	for {
		_, err := h.SetCurrentVersion(ctx, sdkclient.WorkerDeploymentSetCurrentVersionOptions{BuildID: buildID})
		if err == nil {
			return
		}
		var precondition *serviceerror.FailedPrecondition
		var notFound *serviceerror.NotFound
		if !errors.As(err, &precondition) && !errors.As(err, &notFound) {
			t.Fatalf("set %s current: %v", buildID, err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("set %s current: %v (last refusal: %v)", buildID, ctx.Err(), err)
		case <-retry.C:
		}
	}
}

// waitForHostInput follows the run to its host-input request.
func waitForHostInput(t *testing.T, ctx context.Context, run *client.Run) string {
	t.Helper()
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	for env, err := range run.Events(ctx) {
		require.NoError(t, err)
		if env.Type == keel.TypeHostInputRequested {
			ev, err := env.Event()
			require.NoError(t, err)
			return ev.(keel.HostInputRequested).RequestID
		}
	}
	t.Fatal("the run ended without asking the host")
	return ""
}

// requireVersion checks the versioning behavior and build the server
// records for a workflow.
func requireVersion(t *testing.T, ctx context.Context, tc sdkclient.Client, workflowID string,
	behavior enumspb.VersioningBehavior, buildID string) {
	t.Helper()
	desc, err := tc.DescribeWorkflowExecution(ctx, workflowID, "")
	require.NoError(t, err)
	info := desc.GetWorkflowExecutionInfo().GetVersioningInfo()
	require.Equal(t, behavior, info.GetBehavior(), "%s: versioning behavior", workflowID)
	require.Equal(t, buildID, info.GetDeploymentVersion().GetBuildId(), "%s: build", workflowID)
}
