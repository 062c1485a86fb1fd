package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keelrun/keel/api"
)

// evalSlowScript answers in about a second, so an eval is mid-way for a
// while.
const evalSlowScript = `{"repeat":true,"chunk_delay":"150ms","turns":[{"text":["one ","two ","three ","four ","five ","six"]}]}`

// writeDataset writes n cases, each expecting want, and returns the
// file's path.
func writeDataset(t *testing.T, n int, want string) string {
	t.Helper()
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"id":"case-%d","prompt":"Count, case %d.","expect":{"contains":[%q]}}`+"\n", i+1, i+1, want)
	}
	path := filepath.Join(t.TempDir(), "dataset.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestKillDevMidEval kills -9 the whole `keel dev` while an eval runs,
// starts it again on the same data directory, and the eval finishes:
// every case once, none of the finished ones run again (each case's
// session has one run), and "keel eval report --fail-under" passes. Then
// "keel eval cancel" stops another eval mid-way: its report says so and
// exits 2, and "keel eval run --fail-under" exits 1 for an eval whose
// cases fail.
func TestKillDevMidEval(t *testing.T) {
	rig := newDevKillRig(t, 5*time.Minute)
	ctx := rig.ctx
	rig.samePort()
	slow := writeScript(t, evalSlowScript)
	p := rig.start()
	c := rig.dial(p)
	cases, err := api.ReadDataset(strings.NewReader(readFile(t, writeDataset(t, 10, "six"))))
	if err != nil {
		t.Fatal(err)
	}
	ev, err := c.StartEval(ctx, api.EvalInput{ID: "killed", Cases: cases, Candidate: api.RunConfig{Model: slow, Tools: []string{}}, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	for {
		st, err := ev.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Done >= 3 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.kill()
	c.Close()

	p = rig.start()
	c = rig.dial(p)
	defer c.Close()
	var stdout, stderr bytes.Buffer
	if code := dispatch(ctx, []string{"eval", "report", "--address", p.address, "--fail-under", "0.9", "killed"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("eval report: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "100.0% (10/10)") {
		t.Fatalf("report:\n%s", stdout.String())
	}
	for i := range 10 {
		st, err := c.Session(api.EvalCaseSessionID("killed", i, "c")).State(ctx)
		if err != nil || st.Runs != 1 {
			t.Fatalf("case %d: %d runs, %v", i+1, st.Runs, err)
		}
	}

	// Cancelled mid-way: what finished is reported, the rest skipped.
	ev, err = c.StartEval(ctx, api.EvalInput{ID: "cancelled", Cases: cases, Candidate: api.RunConfig{Model: slow, Tools: []string{}}, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	for st, _ := ev.Status(ctx); st.Done < 1; st, _ = ev.Status(ctx) {
		time.Sleep(100 * time.Millisecond)
	}
	stdout.Reset()
	if code := dispatch(ctx, []string{"eval", "cancel", "--address", p.address, "cancelled"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("eval cancel: exit %d\n%s", code, stderr.String())
	}
	stdout.Reset()
	if code := dispatch(ctx, []string{"eval", "report", "--address", p.address, "--json", "cancelled"}, &stdout, &stderr); code != exitCancelled {
		t.Fatalf("eval report of a cancelled eval: exit %d\n%s", code, stderr.String())
	}
	var rep api.EvalReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.Cancelled || rep.Candidate.Passed < 1 || rep.Candidate.Skipped < 5 || rep.Candidate.Failed+rep.Candidate.Errors > 1 {
		t.Fatalf("cancelled report: %+v", rep.Candidate)
	}
	stdout.Reset()
	if code := dispatch(ctx, []string{"eval", "status", "--address", p.address, "cancelled"}, &stdout, &stderr); code != exitOK ||
		!strings.Contains(stdout.String(), `"state": "cancelled"`) {
		t.Fatalf("eval status: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}

	// For CI: a pass rate under --fail-under exits 1.
	fast := writeScript(t, `{"repeat":true,"turns":[{"text":["six"]}]}`)
	stdout.Reset()
	code := dispatch(ctx, []string{"eval", "run", "--address", p.address, "--id", "ci", "--model", fast, "--tools", "",
		"--dataset", writeDataset(t, 4, "seven"), "--fail-under", "0.9"}, &stdout, &stderr)
	if code != exitFailed || !strings.Contains(stdout.String(), "0.0% (0/4)") {
		t.Fatalf("eval run --fail-under: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
