package main

import (
	"os"
	"testing"
)

// envRunAsKeel makes the test binary behave as the keel binary, for tests
// of commands that re-execute themselves (keel bench --worker-process runs
// os.Executable() as `keel worker`). Children inherit it from the test
// that sets it; the test process itself has passed this point by then.
const envRunAsKeel = "KEEL_TEST_RUN_AS_KEEL"

func TestMain(m *testing.M) {
	if os.Getenv(envRunAsKeel) == "1" {
		main()
	}
	code := m.Run()
	_ = os.RemoveAll(testScripts()) // writeScript's directory
	os.Exit(code)
}
