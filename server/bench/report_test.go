package bench_test

import (
	"context"
	"testing"
	"time"

	"github.com/keelrun/keel/server/bench"
)

// TestTargets judges figures on and just past each target's boundary, and
// a server with no samples, which meets no target.
func TestTargets(t *testing.T) {
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	fig := func(p50, p99 float64) bench.Figure { return bench.Figure{P50: ms(p50), P99: ms(p99), N: 10} }
	on := bench.ServerFigures{
		Bare: fig(12.5, 20), ModelStep: fig(15, 30), DeltaNATS: fig(5, 10), DeltaMemory: fig(5, 10), Durable: fig(10, 40),
	}
	past := bench.ServerFigures{
		Bare: fig(12.5, 20), ModelStep: fig(15.01, 30), DeltaNATS: fig(5, 10.01), DeltaMemory: fig(5.01, 10), Durable: fig(10.01, 40),
	}
	rep := &bench.Report{Tuned: on, Untuned: past}
	want := map[string][2]string{
		"model_step":   {bench.Pass, bench.NotApplied},
		"model_ratio":  {bench.Pass, bench.Miss},
		"delta_nats":   {bench.Pass, bench.Miss},
		"delta_memory": {bench.Pass, bench.Miss},
		"durable":      {bench.Pass, bench.NotApplied},
	}
	targets := bench.Targets()
	if len(targets) != len(want) {
		t.Fatalf("%d targets, want %d", len(targets), len(want))
	}
	for _, tg := range targets {
		tuned, untuned := rep.Verdicts(tg)
		if w := want[tg.Measure]; tuned != w[0] || untuned != w[1] {
			t.Errorf("%s: verdicts %s / %s, want %s / %s", tg.Measure, tuned, untuned, w[0], w[1])
		}
		if tg.Met(bench.ServerFigures{}) {
			t.Errorf("%s: met without samples", tg.Measure)
		}
	}
}

func TestRunRefusesBadOptions(t *testing.T) {
	for _, opts := range []bench.Options{{Runs: 0, Steps: 10}, {Runs: 1, Steps: 1}} {
		if _, err := bench.Run(context.Background(), opts); err == nil {
			t.Errorf("Run(%+v) succeeded", opts)
		}
	}
}
