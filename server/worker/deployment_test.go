package worker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/server/common/dynamicconfig"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
	"github.com/keelrun/keel/server/tool"
	"github.com/keelrun/keel/server/worker"
)

// A rolling upgrade on a real server: build v1 is current, a session's
// run waits for host input, another session is idle, build v2 starts and
// becomes current. The run in flight stays on v1 (its model turn after the
// answer is v1's: the session's execution is pinned), the session's next
// execution starts on v2, and its next run runs there; the idle session
// stays on v1 until keel upgrade (MoveIdleSessions) moves it to v2.
func TestRollingUpgradePinsRunsAndMovesSessions(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	const deployment = "keel-rollout"
	// One partition per task queue: the routing reaches each partition of
	// each task queue before it is complete, and under load an attempt
	// that missed one of four partitions waited out the server's
	// one-minute propagation timeout, sometimes twice (waitRouted). The
	// activity partition learns the routing from the workflow root by a
	// long poll, which pauses between fast answers for up to half its
	// timeout (matching's user-data fetch loop): at the default timeout,
	// 2.4 minutes in which the routing cannot complete, longer than the
	// test waits (one clean-clone run in about ten). A 10 s long poll caps
	// that pause at 5 s.
	srv := keeltest.StartServer(t, devserver.Config{DynamicConfig: map[string]any{
		dynamicconfig.MatchingNumTaskqueueReadPartitions.Key().String():  1,
		dynamicconfig.MatchingNumTaskqueueWritePartitions.Key().String(): 1,
		dynamicconfig.MatchingGetUserDataLongPollTimeout.Key().String():  10 * time.Second,
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
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
	// A session that goes idle on v1.
	idle := kc.Session("rollout-idle")
	quick, err := idle.Send(ctx, "hi", client.WithConfig(api.RunConfig{Model: "scripted:quick"}))
	require.NoError(t, err)
	_, err = quick.Outcome(ctx)
	require.NoError(t, err)
	// Its run's execution continues as new (after Temporal's minimal
	// interval): the next, idle one starts on v1 too.
	d, err := tc.DescribeWorkflowExecution(ctx, idle.ID(), "")
	require.NoError(t, err)
	closed := tc.GetWorkflowHistory(ctx, idle.ID(), d.GetWorkflowExecutionInfo().GetFirstRunId(), true,
		enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
	_, err = closed.Next()
	require.NoError(t, err)
	requirePinnedSoon(t, ctx, tc, idle.ID(), "v1")

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
	requirePinnedSoon(t, ctx, tc, sess.ID(), "v2")

	// The idle session is still on v1 until it is moved (keel upgrade);
	// then its execution is on v2, with everything it held.
	requireVersion(t, ctx, tc, idle.ID(), enumspb.VERSIONING_BEHAVIOR_PINNED, "v1")
	require.Eventually(t, func() bool { // visibility lists it as idle once it caught up
		n, err := kc.MoveIdleSessions(ctx)
		return err == nil && n >= 1
	}, time.Minute, 50*time.Millisecond)
	requirePinnedSoon(t, ctx, tc, idle.ID(), "v2")
	st, err := idle.State(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, st.Runs)
	require.Equal(t, "done", st.Last.Text)
}

// requirePinnedSoon waits until a workflow's current execution is pinned to
// buildID: an execution that continued as new auto-upgrades until its first
// workflow task completed.
func requirePinnedSoon(t *testing.T, ctx context.Context, tc sdkclient.Client, workflowID, buildID string) {
	t.Helper()
	require.Eventually(t, func() bool {
		desc, err := tc.DescribeWorkflowExecution(ctx, workflowID, "")
		info := desc.GetWorkflowExecutionInfo().GetVersioningInfo()
		return err == nil && info.GetBehavior() == enumspb.VERSIONING_BEHAVIOR_PINNED &&
			info.GetDeploymentVersion().GetBuildId() == buildID
	}, time.Minute, 20*time.Millisecond, "%s's current execution is pinned to %s", workflowID, buildID)
}

// waitRouted waits until the workflow task queue's root partition routes
// to buildID, the deployment's new current version: from then on a new
// execution (a session's next, continued as new) starts on it (one
// partition, see above). Not the server's report that the routing
// reached every task queue (ROUTING_CONFIG_UPDATE_STATE_COMPLETED): that
// waits on the activity queue's partition too, which learns user data by
// a long poll with pauses, and under a loaded clean-clone run it took
// over five minutes; pinned runs' activities follow their run's version,
// not the current one, so the test needs only the workflow queue's.
func waitRouted(t *testing.T, ctx context.Context, tc sdkclient.Client, buildID string) {
	t.Helper()
	require.Eventually(t, func() bool {
		resp, err := tc.WorkflowService().DescribeTaskQueue(ctx, &workflowservice.DescribeTaskQueueRequest{
			Namespace: devserver.DefaultNamespace, TaskQueue: &taskqueuepb.TaskQueue{Name: api.TaskQueue},
			TaskQueueType: enumspb.TASK_QUEUE_TYPE_WORKFLOW})
		return err == nil && resp.GetVersioningInfo().GetCurrentDeploymentVersion().GetBuildId() == buildID
	}, 5*time.Minute, 20*time.Millisecond, "the workflow task queue routes to %s", buildID)
}

// startBuild starts a worker that is build buildID of deployment, playing
// script for the model spec "scripted:rollout".
func startBuild(t *testing.T, srv *devserver.Server, deployment, buildID, script string) sdkworker.Worker {
	t.Helper()
	var book keeltest.ScriptBook
	book.Add(t, "rollout", script)
	book.Add(t, "quick", `{"repeat":true,"turns":[{"text":["done"]}]}`)
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
			waitRouted(t, ctx, tc, buildID)
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
