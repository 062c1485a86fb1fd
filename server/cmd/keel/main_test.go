package main

import (
	"os"
	"testing"
)

// envRunAsKeel makes the test binary behave as the keel binary, for tests
// that run keel in a process of its own (the kill tests run this binary
// as `keel dev`, to SIGKILL it). Children inherit it from the test that
// sets it; the test process itself has passed this point by then.
const envRunAsKeel = "KEEL_TEST_RUN_AS_KEEL"

func TestMain(m *testing.M) {
	if os.Getenv(envRunAsKeel) == "1" {
		main()
	}
	// keel dev records its NATS credentials for local commands in the
	// user's configuration directory: the tests' stacks (and the keel
	// dev processes they start, which inherit this) use one of their own.
	dir, err := os.MkdirTemp("", "keel-config-")
	if err != nil {
		panic(err)
	}
	os.Setenv(envConfigDir, dir)
	code := m.Run()
	os.RemoveAll(dir)
	_ = os.RemoveAll(testScripts()) // writeScript's directory
	os.Exit(code)
}
