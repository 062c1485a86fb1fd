package main

import (
	"fmt"
	"os"

	"github.com/keelrun/keel/server/worker"
)

// Environment variables that default keel worker's version flags, so a
// deployment manifest can set them beside the image tag.
const (
	envDeployment = "KEEL_DEPLOYMENT"
	envBuildID    = "KEEL_BUILD_ID"
)

// deploymentFlags make `keel worker` one version of a Worker Deployment
// (worker.Options.Deployment and BuildID; docs/operations.md, "Rolling out
// a new version").
type deploymentFlags struct {
	name    string
	buildID string
}

func (d *deploymentFlags) register(fs *flagSet) {
	fs.StringVar(&d.name, "deployment", os.Getenv(envDeployment),
		"Worker Deployment `NAME` this worker is a version of, with --build-id (env "+envDeployment+"; default: unversioned)")
	fs.StringVar(&d.buildID, "build-id", os.Getenv(envBuildID),
		"build `ID` of this worker's version of --deployment (env "+envBuildID+")")
}

// check refuses half a version before anything connects.
func (d *deploymentFlags) check() error {
	if (d.name == "") != (d.buildID == "") {
		return fmt.Errorf("--deployment and --build-id go together (or %s and %s), got %q and %q",
			envDeployment, envBuildID, d.name, d.buildID)
	}
	return nil
}

func (d *deploymentFlags) apply(opts *worker.Options) {
	opts.Deployment, opts.BuildID = d.name, d.buildID
}

// note says what the worker's version means for the operator, or nothing
// for an unversioned worker.
func (d *deploymentFlags) note() string {
	if d.name == "" {
		return ""
	}
	return fmt.Sprintf("keel worker: build %q of Worker Deployment %q: it takes new runs and sessions once it is the current version:\n"+
		"  temporal worker deployment set-current-version --deployment-name %s --build-id %s\n"+
		"Runs already started stay on the build that started them.\n",
		d.buildID, d.name, d.name, d.buildID)
}
