package main

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/keelrun/keel/server/bench"
)

// TestBenchEndToEnd runs a small keel-bench with the NATS worker in a
// child process (this test binary, acting as keel-bench worker) and checks that the
// table has every row with figures and a verdict for every target: not
// the figures themselves, which depend on the machine.
func TestBenchEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two Temporal servers and a worker process")
	}
	t.Setenv(envRunAsKeelBench, "1")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	if code := dispatch(ctx, []string{"--runs", "1", "--steps", "3", "--worker-process"}, &out, &errOut); code != exitOK {
		t.Fatalf("exit status %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	got := out.String()
	fig := `\d+(\.\d+)? / \d+(\.\d+)?`
	rat := `\d+\.\d\d×`
	verdict := `(PASS|MISS)`
	for _, row := range []string{
		`bare activity round trip +` + fig + ` +` + fig + ` +— *\n`,
		`model step \(model turn only\) +` + fig + ` +` + fig + ` +p50 ≤ 15 ms \(tuned\) +` + verdict + `\n`,
		`  model step ÷ bare, p50 +` + rat + ` +` + rat + ` +≤ 1\.2× +` + verdict + ` / ` + verdict + `\n`,
		`tool step \(model turn \+ no-op tool\) +` + fig + ` +` + fig + ` +— *\n`,
		`  tool step ÷ \(2 × bare\), p50 +` + rat + ` +` + rat + ` +— *\n`,
		`query round trip +` + fig + ` +` + fig + ` +— *\n`,
		`update round trip +` + fig + ` +` + fig + ` +— *\n`,
		`delta via NATS \(worker in another process\) +` + fig + ` +` + fig + ` +p50 ≤ 5 ms, p99 ≤ 10 ms +` + verdict + ` / ` + verdict + `\n`,
		`delta in-process +` + fig + ` +` + fig + ` +p50 ≤ 5 ms, p99 ≤ 10 ms +` + verdict + ` / ` + verdict + `\n`,
		`durable event from commit +` + fig + ` +` + fig + ` +p50 ≤ 10 ms \(tuned\) +` + verdict + `\n`,
		`  durable p50 ÷ query p50 +` + rat + ` +` + rat + ` +— *\n`,
		// 1 run of 3 model turns is 2 steps; each latency run streams
		// 3 turns of 20 deltas.
		`samples per server: 2 model steps, 2 tool steps, 20 bare round trips, 20 queries, 20 updates, 60 deltas via NATS, 60 in-process, \d+ durable events\n`,
	} {
		if !regexp.MustCompile(row).MatchString(got) {
			t.Errorf("no row matching %q in:\n%s", row, got)
		}
	}
	if !strings.Contains(errOut.String(), "keel-bench: untuned: deltas via NATS from a worker in another process") {
		t.Errorf("progress does not say a worker process carried the deltas:\n%s", errOut.String())
	}
}

// TestBenchVerdicts checks the table's and the JSON report's verdicts at
// and around each target's boundary, on figures made up for the purpose.
func TestBenchVerdicts(t *testing.T) {
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	fig := func(p50, p99 float64) bench.Figure {
		return bench.Figure{P50: ms(p50), P99: ms(p99), N: 10}
	}
	rep := &bench.Report{
		Runs: 2, Steps: 5,
		Tuned: bench.ServerFigures{
			Bare: fig(12.5, 20), ModelStep: fig(15, 30), ToolStep: fig(25, 40), Query: fig(4, 8), Update: fig(6, 9),
			DeltaNATS: fig(5, 10), DeltaMemory: fig(0.1, 0.5), Durable: fig(10, 40),
		},
		Untuned: bench.ServerFigures{
			Bare: fig(50, 60), ModelStep: fig(60.1, 90), ToolStep: fig(100, 120), Query: fig(5, 9), Update: fig(45, 50),
			DeltaNATS: fig(5.01, 10), DeltaMemory: fig(0.1, 10.5), Durable: fig(50, 80),
		},
	}
	var out bytes.Buffer
	writeBenchTable(&out, rep)
	lines := map[string]string{}
	for _, l := range strings.Split(out.String(), "\n") {
		if i := strings.Index(l, "  "); i > 0 {
			lines[strings.TrimSpace(l[:i])] = strings.Join(strings.Fields(l[i:]), " ")
		}
	}
	wantLines := map[string]string{
		"model step (model turn only)":                             "15.0 / 30.0 60.1 / 90.0 p50 ≤ 15 ms (tuned) PASS",
		"delta via NATS (worker in this process, own connections)": "5.00 / 10.0 5.01 / 10.0 p50 ≤ 5 ms, p99 ≤ 10 ms PASS / MISS",
		"delta in-process":                                         "0.10 / 0.50 0.10 / 10.5 p50 ≤ 5 ms, p99 ≤ 10 ms PASS / MISS",
		"durable event from commit":                                "10.0 / 40.0 50.0 / 80.0 p50 ≤ 10 ms (tuned) PASS",
		"tool step (model turn + no-op tool)":                      "25.0 / 40.0 100 / 120 —",
	}
	for label, want := range wantLines {
		if got := lines[label]; got != want {
			t.Errorf("row %q: got %q, want %q\n%s", label, got, want, out.String())
		}
	}
	// Indented ratio rows are keyed by their text after the indent.
	for label, want := range map[string]string{
		// 15 / 12.5 is on the target; 60.1 / 50 just over it.
		"model step ÷ bare, p50":      "1.20× 1.20× ≤ 1.2× PASS / MISS",
		"tool step ÷ (2 × bare), p50": "1.00× 1.00× —",
		"durable p50 ÷ query p50":     "2.50× 10.00× —",
	} {
		re := regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(label) + ` +(.*)$`)
		m := re.FindStringSubmatch(out.String())
		if m == nil || strings.Join(strings.Fields(m[1]), " ") != want {
			t.Errorf("row %q: got %q, want %q", label, m, want)
		}
	}

	var got jsonReport
	b, err := json.Marshal(benchJSON(rep))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := []jsonTarget{
		{Measure: "model_step", Target: "p50 ≤ 15 ms (tuned)", Tuned: "PASS", Untuned: "—"},
		{Measure: "model_ratio", Target: "≤ 1.2×", Tuned: "PASS", Untuned: "MISS"},
		{Measure: "delta_nats", Target: "p50 ≤ 5 ms, p99 ≤ 10 ms", Tuned: "PASS", Untuned: "MISS"},
		{Measure: "delta_memory", Target: "p50 ≤ 5 ms, p99 ≤ 10 ms", Tuned: "PASS", Untuned: "MISS"},
		{Measure: "durable", Target: "p50 ≤ 10 ms (tuned)", Tuned: "PASS", Untuned: "—"},
	}
	if diff := cmp.Diff(want, got.Targets); diff != "" {
		t.Errorf("JSON targets (-want +got):\n%s", diff)
	}
	if f := got.Tuned.Figures["model_step"]; f.P50 != 15 || f.P99 != 30 || f.N != 10 {
		t.Errorf("JSON tuned model_step = %+v", f)
	}
	if r := got.Tuned.Ratios["model_step_over_bare"]; r != 1.2 {
		t.Errorf("JSON tuned model ratio = %v, want 1.2", r)
	}

	// On the target is a pass on the untuned server too.
	rep.Untuned.ModelStep = fig(60, 90)
	if _, u := rep.Verdicts(bench.Targets()[1]); u != bench.Pass {
		t.Errorf("untuned model step ratio %.3f: verdict %s, want PASS", rep.Untuned.ModelRatio(), u)
	}
}
