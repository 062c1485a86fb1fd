package bench_test

import (
	"context"
	"testing"
	"time"

	"github.com/keelrun/keel/bench"
	"github.com/keelrun/keel/devserver"
	"github.com/keelrun/keel/internal/keeltest"
	"github.com/keelrun/keel/tool"
)

// BenchmarkStepOverhead compares the run loop's steps with bare activity
// round trips measured on the same server in the same run, tuned and
// untuned. b.N is the number of runs, each of stepsPerRun steps.
//
//   - model: each step is one model turn (scripted provider, no latency)
//     whose tool call the workflow answers itself (an unavailable tool), so
//     the step is one ModelTurn activity plus the loop's own work; compared
//     with one bare activity round trip.
//
//   - tool: each step is a model turn plus one no-op tool call, two
//     activities; compared with two bare round trips.
//
//     go test -run '^$' -bench StepOverhead -benchtime 20x ./bench/
func BenchmarkStepOverhead(b *testing.B) {
	const stepsPerRun = 10
	for _, tuned := range []bool{true, false} {
		for _, kind := range []string{"model", "tool"} {
			name := map[bool]string{true: "tuned", false: "untuned"}[tuned] + "/" + kind
			b.Run(name, func(b *testing.B) { benchSteps(b, tuned, kind, stepsPerRun) })
		}
	}
}

func benchSteps(b *testing.B, tuned bool, kind string, stepsPerRun int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	srv := devserver.StartForTest(b, devserver.Config{Untuned: !tuned})
	tc := keeltest.Dial(b, srv)
	toolName, activitiesPerStep := "missing", 1
	if kind == "tool" {
		toolName, activitiesPerStep = "noop", 2
	}
	models := bench.NewStampingModels(stepsPerRun, toolName)
	reg, err := tool.NewRegistry(bench.NoopTool())
	if err != nil {
		b.Fatal(err)
	}
	keeltest.StartWorker(b, srv, keeltest.WorkerOptions{Models: models, Tools: reg})
	kc := keeltest.Client(b, srv, nil)

	// Warm up both paths so connections and caches are not measured.
	if _, err := devserver.MeasureActivityRoundTrip(ctx, tc, "", 5); err != nil {
		b.Fatal(err)
	}
	if _, err := bench.MeasureSteps(ctx, kc, models, 1, stepsPerRun); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	steps, err := bench.MeasureSteps(ctx, kc, models, b.N, stepsPerRun)
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	bare, err := devserver.MeasureActivityRoundTrip(ctx, tc, "", len(steps))
	if err != nil {
		b.Fatal(err)
	}
	base := time.Duration(activitiesPerStep) * bare.P50()
	ratio := float64(steps.P50()) / float64(base)
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	b.ReportMetric(ms(steps.P50()), "step-p50-ms")
	b.ReportMetric(ms(steps.P99()), "step-p99-ms")
	b.ReportMetric(ms(bare.P50()), "bare-p50-ms")
	b.ReportMetric(ratio, "ratio")
	b.Logf("%d steps: step p50 %v p99 %v | bare activity round trip p50 %v p99 %v | step / (%d x bare) = %.2f",
		len(steps), steps.P50(), steps.P99(), bare.P50(), bare.P99(), activitiesPerStep, ratio)
}
