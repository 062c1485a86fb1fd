package main

import (
	"strings"
	"testing"
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
