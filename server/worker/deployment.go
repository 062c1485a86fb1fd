package worker

import (
	"errors"
	"fmt"

	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Worker Deployment versioning: a worker started with a deployment name and
// a build ID polls for that version only, and the server routes each
// workflow by its versioning behavior once an operator makes a version
// current (docs/operations.md, "Rolling out a new version"):
//
//   - a session's execution is pinned: it runs one run (one execution per
//     run), and every task of that run, its model turns and tools included,
//     goes to workers of the build that started it, so a run never meets
//     code it did not start with. Its continue-as-new starts the next
//     execution on the current build (workflows, handOver). An idle
//     execution stays on its build until its next prompt has run;
//   - the Runtime workflow moves to the current build at its next task: it
//     lives for months, and every change in what it does is guarded with
//     workflow.GetVersion and checked by the replay tests;
//   - a RateLimit workflow moves too: every worker asks it, whatever its
//     build, and it continues as new often (docs/contract.md §20.5).
const (
	sessionVersioning = workflow.VersioningBehaviorPinned
	runtimeVersioning = workflow.VersioningBehaviorAutoUpgrade
	// scheduledSendVersioning pins a schedule's firing, which may wait for
	// its run's outcome as long as the run lasts, as the run is pinned.
	scheduledSendVersioning = workflow.VersioningBehaviorPinned
	rateLimitVersioning     = workflow.VersioningBehaviorAutoUpgrade
	// scheduleRegistryVersioning moves the registry, which lives as long
	// as the namespace, to each new deployment, as the rate limits move.
	scheduleRegistryVersioning = workflow.VersioningBehaviorAutoUpgrade
	// evalVersioning pins an eval, which waits for its cases' runs as
	// long as they last, as they are pinned.
	evalVersioning = workflow.VersioningBehaviorPinned
)

// ErrDeployment is returned (wrapped) for a deployment name without a build
// ID or the other way round.
var ErrDeployment = errors.New("worker: deployment name and build ID go together")

// deploymentOptions returns the Temporal worker's versioning options for
// opts: versioned when Deployment and BuildID are both set, unversioned
// when both are empty.
func deploymentOptions(opts Options) (sdkworker.DeploymentOptions, error) {
	switch {
	case opts.Deployment == "" && opts.BuildID == "":
		return sdkworker.DeploymentOptions{}, nil
	case opts.Deployment == "" || opts.BuildID == "":
		return sdkworker.DeploymentOptions{}, fmt.Errorf("%w: got deployment %q and build ID %q",
			ErrDeployment, opts.Deployment, opts.BuildID)
	}
	// No DefaultVersioningBehavior: every workflow Register adds names its
	// own, and a workflow added without one fails at registration instead
	// of silently taking a default.
	return sdkworker.DeploymentOptions{
		UseVersioning: true,
		Version:       sdkworker.WorkerDeploymentVersion{DeploymentName: opts.Deployment, BuildID: opts.BuildID},
	}, nil
}
