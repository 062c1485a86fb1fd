package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestBenchConcurrencyEndToEnd runs `keel-bench concurrency` on two
// sessions, one of them cancelled, with both workers in child processes
// (this test binary, acting as keel-bench), and checks that the table has its
// rows and a verdict line for every target: not the figures, which depend
// on the machine.
func TestBenchConcurrencyEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server and two worker processes")
	}
	t.Setenv(envRunAsKeelBench, "1")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	profiles := filepath.Join(t.TempDir(), "cpu")
	args := []string{"concurrency", "--sessions", "2", "--cancel-fraction", "0.5", "--label", "test",
		"--worker-flags", "--workflow-pollers 4 --heartbeat-interval 4s", "--shaped", "--foreign", "--cpu-profile", profiles}
	if code := dispatch(ctx, args, &out, &errOut); code != exitOK {
		t.Fatalf("exit status %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	table := out.String()
	for _, want := range []string{
		"keel-bench concurrency (test)", "each worker in a process of its own",
		"1 completed, 1 cancelled, 0 failed", "RecordActivityTaskHeartbeat", "ExecuteMultiOperation", "1.00 (clients 1.00)",
		"workflow tasks per step", "UpdateWorkflowExecution", "CPU s: worker process",
		"command_ScheduleActivityTask", "billable actions, keel ÷ bare", "; keel ÷ shaped",
		"cancel of a streaming turn p99 ≤ 500 ms",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("the table lacks %q:\n%s", want, table)
		}
	}
	if regexp.MustCompile(`CPU s: worker process +—`).MatchString(table) {
		t.Errorf("no worker CPU time:\n%s", table)
	}
	// The shaped baseline: its row, with no session failed.
	if !regexp.MustCompile(`(?m)^shaped: bare Temporal in keel's shape.*\n.*keel ÷ shaped.*\n2 +[0-9.]+ s / [0-9.]+ s .* 0\n`).MatchString(table) {
		t.Errorf("no shaped baseline row for 2 sessions, none failed:\n%s", table)
	}
	// The update-with-start baseline and the foreign client: their rows,
	// with no session failed, and their targets judged.
	for _, path := range []string{"bare update-with-start", "keel, Go client", "keel, foreign client"} {
		if !regexp.MustCompile(`(?m)^2 +` + path + ` +[0-9.]+ s / [0-9.]+ s +[0-9.]+× +[0-9.]+ s / [0-9.]+ s .* 0$`).MatchString(table) {
			t.Errorf("no row of %s for 2 sessions, none failed:\n%s", path, table)
		}
	}
	for _, target := range []string{"send p99 ≤ 1.5× bare update-with-start p99", "foreign client: send p99 ≤ 1.5× bare update-with-start p99"} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(target) + ` +every N +(PASS|FAIL) +2: [0-9.]+×`).MatchString(table) {
			t.Errorf("target %q not judged:\n%s", target, table)
		}
	}
	for _, phase := range []string{"baseline", "baseline-uws", "keel", "foreign", "shaped"} {
		if fi, err := os.Stat(profiles + "-2-" + phase + ".pprof"); err != nil || fi.Size() == 0 {
			t.Errorf("CPU profile of the %s phase: %v", phase, err)
		}
	}
}

// Flags for the worker process that keel-bench worker would refuse are refused
// before any server starts.
func TestBenchConcurrencyWorkerFlags(t *testing.T) {
	for _, flags := range []string{"--no-such-flag", "--workflow-pollers", "--workflow-pollers many"} {
		code, _, stderr := call(t, "concurrency", "--worker-flags", flags)
		if code != exitUsage || !strings.Contains(stderr, "--worker-flags") {
			t.Errorf("--worker-flags %q: exit %d, stderr %q", flags, code, stderr)
		}
	}
	code, _, stderr := call(t, "concurrency", "--in-process", "--worker-flags", "--no-cancel-watch")
	if code != exitUsage || !strings.Contains(stderr, "--in-process") {
		t.Errorf("--worker-flags with --in-process: exit %d, stderr %q", code, stderr)
	}
}

func TestParseSessions(t *testing.T) {
	got, err := parseSessions("100, 300,1000")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]int{100, 300, 1000}, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	for _, bad := range []string{"", "0", "ten", "5,,6"} {
		if _, err := parseSessions(bad); err == nil {
			t.Errorf("parseSessions(%q) accepted it", bad)
		}
	}
}
