package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
)

// Half a version is a usage error, from flags or from the environment,
// before the worker connects to anything.
func TestWorkerDeploymentFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
	}{
		{name: "deployment only", args: []string{"worker", "--deployment", "keel"}},
		{name: "build ID only", args: []string{"worker", "--build-id", "b2"}},
		{name: "environment", env: map[string]string{envDeployment: "keel"}, args: []string{"worker"}},
		{name: "flag clears env", env: map[string]string{envDeployment: "keel", envBuildID: "b1"},
			args: []string{"worker", "--build-id", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(envDeployment, "")
			t.Setenv(envBuildID, "")
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			code, stdout, stderr := call(t, tc.args...)
			if code != exitUsage {
				t.Errorf("exit status %d, want %d (stderr %q)", code, exitUsage, stderr)
			}
			if !strings.Contains(stderr, "--deployment and --build-id go together") {
				t.Errorf("stderr %q does not say the flags go together", stderr)
			}
			if stdout != "" {
				t.Errorf("a usage error printed to stdout: %q", stdout)
			}
		})
	}
}

// `keel worker --deployment --build-id` polls as that version: once an
// operator makes it current, a run goes to it and stays pinned to it. The
// run executes in its session's workflow (an inline session), whose
// execution is pinned and continues as new onto the current build.
func TestWorkerJoinsDeployment(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	clearTemporalEnv(t)
	ctx, cancel := context.WithTimeout(withNoInput(context.Background()), 2*time.Minute)
	defer cancel()
	srv := keeltest.StartServer(t, devserver.Config{})
	startKeelWorker(t, ctx, "--address", srv.Address(), "--deployment", "keel-cli", "--build-id", "b1")
	tc := keeltest.Dial(t, srv)

	// The server learns of the version when the worker polls: until then
	// it refuses to make it current, so retry on that refusal only.
	h := tc.WorkerDeploymentClient().GetHandle("keel-cli")
	retry := time.NewTicker(100 * time.Millisecond)
	defer retry.Stop()
	for {
		_, err := h.SetCurrentVersion(ctx, sdkclient.WorkerDeploymentSetCurrentVersionOptions{BuildID: "b1"})
		if err == nil {
			break
		}
		var precondition *serviceerror.FailedPrecondition
		var notFound *serviceerror.NotFound
		if !errors.As(err, &precondition) && !errors.As(err, &notFound) {
			t.Fatalf("set b1 current: %v", err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("set b1 current: %v (last refusal: %v)", ctx.Err(), err)
		case <-retry.C:
		}
	}

	code, out, errOut := keelCmd(ctx, "run", "--address", srv.Address(), "--nats", "",
		"--model", writeScript(t, connScript), "--session", "deploy-cli", "hello")
	if code != exitOK || !strings.Contains(out, "Reached you.") {
		t.Fatalf("status %d, want 0 and the run's text\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	// The run executed in its session's workflow (an inline session), in
	// the session's first execution, pinned to b1 (server/worker/deployment.go);
	// it continued as new onto the current build, b1 still.
	first, err := firstExecution(ctx, tc, "deploy-cli")
	if err != nil {
		t.Fatal(err)
	}
	desc, err := tc.DescribeWorkflowExecution(ctx, "deploy-cli", first)
	if err != nil {
		t.Fatal(err)
	}
	checkPinned(t, "the run's execution", desc.GetWorkflowExecutionInfo().GetVersioningInfo())
	if err := waitClosed(ctx, tc, "deploy-cli", first); err != nil {
		t.Fatal(err)
	}
	// The next execution auto-upgrades until its first workflow task is
	// done, and is pinned from then on.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		desc, err = tc.DescribeWorkflowExecution(ctx, "deploy-cli", "")
		if err != nil {
			t.Fatal(err)
		}
		if desc.GetWorkflowExecutionInfo().GetVersioningInfo().GetBehavior() == enumspb.VERSIONING_BEHAVIOR_PINNED {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the session's next execution was never pinned")
		case <-tick.C:
		}
	}
	if desc.GetWorkflowExecutionInfo().GetExecution().GetRunId() == first {
		t.Fatal("the session did not continue as new after its run")
	}
	next := desc.GetWorkflowExecutionInfo().GetVersioningInfo()
	checkPinned(t, "the session's next execution", next)
	if next.GetContinueAsNewInitialVersioningBehavior() != enumspb.CONTINUE_AS_NEW_VERSIONING_BEHAVIOR_AUTO_UPGRADE {
		t.Errorf("the session's next execution did not start on the current build: %v", next)
	}
}

func checkPinned(t *testing.T, what string, info *workflowpb.WorkflowExecutionVersioningInfo) {
	t.Helper()
	if info.GetBehavior() != enumspb.VERSIONING_BEHAVIOR_PINNED ||
		info.GetDeploymentVersion().GetDeploymentName() != "keel-cli" || info.GetDeploymentVersion().GetBuildId() != "b1" {
		t.Errorf("%s's versioning: %v, want pinned to keel-cli b1", what, info)
	}
}
