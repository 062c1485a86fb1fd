package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// keel eval run refuses, before it connects, what it cannot run: no
// cases, flags that are not an eval's, a pass rate outside 0 to 1, and a
// dataset line that names a file, with the line's number.
func TestEvalRunRefusesBadArguments(t *testing.T) {
	dir := t.TempDir()
	hostile := filepath.Join(dir, "hostile.jsonl")
	if err := os.WriteFile(hostile, []byte(`{"prompt":"ok"}`+"\n"+`{"prompt":"x","attachments":[{"path":"/etc/passwd"}]}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := closedAddress(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"eval", "run", "--address", addr}, "needs cases or recorded sessions"},
		{[]string{"eval", "run", "--address", addr, "--sessions", "s", "--session", "x"}, "--session: not for an eval"},
		{[]string{"eval", "run", "--address", addr, "--sessions", "s", "--fail-under", "2"}, "--fail-under must be from 0 to 1"},
		{[]string{"eval", "run", "--address", addr, "--sessions", "s", "--concurrency", "1000"}, "concurrency must be 1 to 64"},
		{[]string{"eval", "run", "--address", addr, "--dataset", hostile}, "dataset line 2"},
		{[]string{"eval", "run", "--address", addr, "--sessions", "../etc"}, "session ID"},
		{[]string{"eval", "status", "--address", addr, "a/b"}, "session ID"},
		{[]string{"eval", "nope"}, "unknown command"},
	} {
		code, _, stderr := call(t, tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, exitUsage, tc.want)
		}
	}
}
