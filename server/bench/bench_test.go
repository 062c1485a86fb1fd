package bench_test

import (
	"context"
	"testing"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/server/bench"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/hook"
	"github.com/keelrun/keel/server/internal/keeltest"
	"github.com/keelrun/keel/server/tool"
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
//     go test -run '^$' -bench StepOverhead -benchtime 20x ./server/bench/
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
	srv := keeltest.StartServer(b, devserver.Config{Untuned: !tuned})
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
	if _, err := bench.MeasureActivityRoundTrip(ctx, tc, "", 5); err != nil {
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
	bare, err := bench.MeasureActivityRoundTrip(ctx, tc, "", len(steps))
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

// BenchmarkEventLatency times events from their source to a client loop on
// its own Temporal and live connections: deltas via NATS (an embedded
// server, separate connections for worker and client) and in process, and
// durable events via history long-poll plus the events query; next to the
// server's bare query and update round trips measured in the same run.
// b.N is the number of runs (60 deltas and ~20 durable events each).
//
//	go test -run '^$' -bench EventLatency -benchtime 10x ./server/bench/
func BenchmarkEventLatency(b *testing.B) {
	for _, via := range []string{"nats", "memory"} {
		b.Run(via, func(b *testing.B) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			srv := keeltest.StartServer(b, devserver.Config{})
			var pub, sub live.Channel
			if via == "nats" {
				ns := keeltest.StartNATSServer(b)
				pub, sub = keeltest.DialNATS(b, ns.ClientURL(), live.NATSOptions{}), keeltest.DialNATS(b, ns.ClientURL(), live.NATSOptions{})
			} else {
				mem := live.NewMemory()
				pub, sub = mem, mem
			}
			book := &keeltest.ScriptBook{}
			model := book.Add(b, "latency", bench.LatencyScript)
			reg, err := tool.NewRegistry(bench.NoopTool())
			if err != nil {
				b.Fatal(err)
			}
			keeltest.StartWorker(b, srv, keeltest.WorkerOptions{Models: book, Tools: reg, Live: pub})
			kc := keeltest.Client(b, srv, sub)
			if _, err := bench.MeasureEventLatency(ctx, kc, model, 1); err != nil { // warm up
				b.Fatal(err)
			}
			b.ResetTimer()
			lat, err := bench.MeasureEventLatency(ctx, kc, model, b.N)
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			tc := keeltest.Dial(b, srv)
			query, err := bench.MeasureQueryRoundTrip(ctx, tc, "", 50)
			if err != nil {
				b.Fatal(err)
			}
			update, err := bench.MeasureUpdateRoundTrip(ctx, tc, "", 50)
			if err != nil {
				b.Fatal(err)
			}
			ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
			b.ReportMetric(ms(lat.Deltas.P50()), "delta-p50-ms")
			b.ReportMetric(ms(lat.Deltas.P99()), "delta-p99-ms")
			b.ReportMetric(ms(lat.Durable.P50()), "durable-p50-ms")
			b.ReportMetric(ms(lat.Durable.P99()), "durable-p99-ms")
			b.ReportMetric(ms(lat.DurableFromTask.P50()), "durable-from-task-p50-ms")
			b.ReportMetric(ms(query.P50()), "query-p50-ms")
			b.ReportMetric(ms(update.P50()), "update-p50-ms")
			b.Logf("%s: deltas %v | durable from commit %v | durable from task start %v | query RTT %v | update RTT %v | durable p50 / query p50 = %.2f",
				via, lat.Deltas, lat.Durable, lat.DurableFromTask, query, update, float64(lat.Durable.P50())/float64(query.P50()))
		})
	}
}

// BenchmarkStepPhases splits keel's model step and a bare activity round
// trip, measured on the same tuned server in the same run, into the
// phases of bench.Phases by the server's history timestamps, and prints
// each phase's p50 for both with keel ÷ bare: where the model step's
// overhead goes. b.N is the number of keel runs of 10 steps.
//
//	go test -run '^$' -bench StepPhases -benchtime 20x ./server/bench/
func BenchmarkStepPhases(b *testing.B) {
	const stepsPerRun = 10
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	srv := keeltest.StartServer(b, devserver.Config{})
	tc := keeltest.Dial(b, srv)
	models := bench.NewStampingModels(stepsPerRun, "missing")
	reg, err := tool.NewRegistry(bench.NoopTool())
	if err != nil {
		b.Fatal(err)
	}
	keeltest.StartWorker(b, srv, keeltest.WorkerOptions{Models: models, Tools: reg})
	kc := keeltest.Client(b, srv, nil)
	if _, err := bench.MeasureBareStepPhases(ctx, tc, 5); err != nil {
		b.Fatal(err)
	}
	if _, err := bench.MeasureKeelStepPhases(ctx, kc, 1, stepsPerRun); err != nil {
		b.Fatal(err)
	}
	// A keel run and a bare run of as many steps take turns, so that both
	// meet the same load on a shared machine.
	b.ResetTimer()
	var k, bare bench.Phases
	for range b.N {
		kp, err := bench.MeasureKeelStepPhases(ctx, kc, 1, stepsPerRun)
		if err != nil {
			b.Fatal(err)
		}
		bp, err := bench.MeasureBareStepPhases(ctx, tc, stepsPerRun)
		if err != nil {
			b.Fatal(err)
		}
		k.Add(kp)
		bare.Add(bp)
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	b.Logf("%d keel steps, %d bare; p50 ms by the server's history timestamps:", len(k.Step), len(bare.Step))
	b.Logf("%-9s %8s %8s %8s", "phase", "keel", "bare", "keel÷bare")
	for _, ph := range []struct {
		name       string
		keel, bare bench.Latencies
	}{
		{"dispatch", k.Dispatch, bare.Dispatch}, {"activity", k.Activity, bare.Activity},
		{"wake", k.Wake, bare.Wake}, {"decide", k.Decide, bare.Decide},
		{"rest", k.Rest, bare.Rest}, {"step", k.Step, bare.Step},
	} {
		r := 0.0
		if ph.bare.P50() > 0 {
			r = float64(ph.keel.P50()) / float64(ph.bare.P50())
		}
		b.Logf("%-9s %8.2f %8.2f %8.2f", ph.name, ms(ph.keel.P50()), ms(ph.bare.P50()), r)
	}
	b.ReportMetric(ms(k.Step.P50()), "keel-step-p50-ms")
	b.ReportMetric(ms(bare.Step.P50()), "bare-step-p50-ms")
}

// BenchmarkHookOverhead compares steps of runs that name a no-op hook at
// before_step (one Hook activity per step that answers continue) with the
// same runs naming none, on the same server and worker, the two
// interleaved run by run so that both see the same load. b.N is the
// number of runs of each, each of stepsPerRun model steps whose tool call
// the workflow answers itself (as BenchmarkStepOverhead/model).
//
//	go test -run '^$' -bench HookOverhead -benchtime 20x ./server/bench/
func BenchmarkHookOverhead(b *testing.B) {
	const stepsPerRun = 10
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	srv := keeltest.StartServer(b, devserver.Config{})
	models := bench.NewStampingModels(stepsPerRun, "missing")
	noop := hook.Func(hook.Spec{Points: []keel.HookPoint{keel.HookBeforeStep}},
		func(context.Context, hook.Call) (hook.Decision, error) { return hook.Decision{}, nil })
	keeltest.StartWorker(b, srv, keeltest.WorkerOptions{Models: models, Hooks: map[string]hook.Hook{"noop": noop}})
	kc := keeltest.Client(b, srv, nil)
	hooked := []string{"noop"}
	for _, h := range [][]string{nil, hooked} {
		if _, err := bench.MeasureHookedSteps(ctx, kc, models, 1, stepsPerRun, h); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	var bare, with bench.Latencies
	for range b.N {
		s, err := bench.MeasureHookedSteps(ctx, kc, models, 1, stepsPerRun, nil)
		if err != nil {
			b.Fatal(err)
		}
		bare = append(bare, s...)
		if s, err = bench.MeasureHookedSteps(ctx, kc, models, 1, stepsPerRun, hooked); err != nil {
			b.Fatal(err)
		}
		with = append(with, s...)
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	ratio := float64(with.P50()) / float64(bare.P50())
	b.ReportMetric(ms(bare.P50()), "step-p50-ms")
	b.ReportMetric(ms(with.P50()), "hooked-step-p50-ms")
	b.ReportMetric(ms(with.P50()-bare.P50()), "hook-cost-ms")
	b.ReportMetric(ratio, "ratio")
	b.Logf("%d steps each: without hooks p50 %v p99 %v | a no-op hook at before_step p50 %v p99 %v | ratio %.2f",
		len(bare), bare.P50(), bare.P99(), with.P50(), with.P99(), ratio)
}
