package e2e_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/devserver"
	"github.com/keelrun/keel/internal/keeltest"
)

// foreignTSDir is the TypeScript example that drives a session with
// Temporal's SDK alone (docs/foreign-clients.md).
const foreignTSDir = "../examples/temporal-client-ts"

const foreignTSScript = `{"turns":[{"text":["Hello from ", "keel."]}]}`

// TestForeignTypeScriptClient runs examples/temporal-client-ts against an
// embedded server and a keel worker with a scripted model: a client with
// no keel code sends a prompt (update-with-start "send"), waits for the
// outcome (update "outcome") and reads the session's events (query
// "events"). It needs node and npm; without them it is skipped, unless CI
// is set, where it fails.
func TestForeignTypeScriptClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = exec.LookPath("npm")
	}
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skip("node or npm is not installed: the TypeScript example cannot run (with CI set, this test fails instead)")
		}
		t.Fatal("CI is set but node or npm is not installed (.ci/run installs nodejs and npm)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := foreignTSProject(t, ctx)

	srv := keeltest.StartServer(t, devserver.Config{})
	keeltest.StartWorker(t, srv, keeltest.WorkerOptions{Script: foreignTSScript})

	cmd := exec.CommandContext(ctx, node, "main.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"TEMPORAL_ADDRESS="+srv.Address(), "TEMPORAL_NAMESPACE="+srv.Namespace(),
		"KEEL_SESSION=ts-foreign", "KEEL_PROMPT=Say hello.")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node main.mjs: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
	t.Logf("node main.mjs:\n%s", out)
	lines := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok {
			lines[k] = v
		}
	}
	var outcome keel.Outcome
	if err := json.Unmarshal([]byte(lines["outcome"]), &outcome); err != nil {
		t.Fatalf("outcome line: %v\n%s", err, out)
	}
	if outcome.Status != keel.StatusCompleted || outcome.Text != "Hello from keel." ||
		outcome.Number != 1 || outcome.RunID != keel.RunID("ts-foreign", 1) {
		t.Errorf("outcome = %+v, want run 1 completed with text %q", outcome, "Hello from keel.")
	}
	events := strings.Fields(lines["events"])
	if !cliInOrder(events, []string{keel.TypeRunStarted, keel.TypeRunCompleted}) {
		t.Errorf("events = %v, want %s then %s", events, keel.TypeRunStarted, keel.TypeRunCompleted)
	}
	if _, ok := lines["segment"]; ok {
		t.Errorf("a one-turn run's events came as a segment: %s", lines["segment"])
	}
}

// foreignTSProject copies the example to a temporary directory and
// installs its locked dependencies there (npm ci), or reuses the
// example's node_modules when it has one.
func foreignTSProject(t *testing.T, ctx context.Context) string {
	t.Helper()
	src, err := filepath.Abs(foreignTSDir)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{"package.json", "package-lock.json", "main.mjs"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if fi, err := os.Stat(filepath.Join(src, "node_modules")); err == nil && fi.IsDir() {
		if err := os.Symlink(filepath.Join(src, "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in a copy of %s: %v\n%s", foreignTSDir, err, out)
	}
	return dir
}
