package worker

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	sdkworker "go.temporal.io/sdk/worker"
)

func TestDeploymentOptions(t *testing.T) {
	versioned := sdkworker.DeploymentOptions{
		UseVersioning: true,
		Version:       sdkworker.WorkerDeploymentVersion{DeploymentName: "keel", BuildID: "b2"},
	}
	for _, tc := range []struct {
		name       string
		deployment string
		buildID    string
		want       sdkworker.DeploymentOptions
		err        error
	}{
		{name: "unversioned"},
		{name: "versioned", deployment: "keel", buildID: "b2", want: versioned},
		{name: "no build ID", deployment: "keel", err: ErrDeployment},
		{name: "no deployment", buildID: "b2", err: ErrDeployment},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := deploymentOptions(Options{Deployment: tc.deployment, BuildID: tc.buildID})
			if !errors.Is(err, tc.err) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}

// New refuses half a version before it starts anything.
func TestNewRefusesHalfAVersion(t *testing.T) {
	_, err := New(nil, Options{Deployment: "keel"})
	if !errors.Is(err, ErrDeployment) {
		t.Fatalf("New with a deployment and no build ID: %v, want ErrDeployment", err)
	}
}
