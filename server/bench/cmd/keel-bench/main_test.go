package main

import (
	"bytes"
	"context"
	"os"
	"testing"
)

// envRunAsKeelBench makes the test binary behave as keel-bench, for the
// tests of commands that re-execute themselves (their worker processes).
// Children inherit it from the test that sets it.
const envRunAsKeelBench = "KEEL_TEST_RUN_AS_KEEL_BENCH"

func TestMain(m *testing.M) {
	if os.Getenv(envRunAsKeelBench) == "1" {
		main()
	}
	os.Exit(m.Run())
}

// call runs keel-bench with args and returns its exit status and output.
func call(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = dispatch(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}
