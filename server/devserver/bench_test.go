package devserver_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/keelrun/keel/server/bench"
	"github.com/keelrun/keel/server/devserver"
)

// Run with (docs/devserver.md has the figures):
//
//	go test ./server/devserver -run '^$' -bench RoundTrip -benchtime 200x
//
// Both servers run side by side in the process, each on its own SQLite file
// as keel dev does, and every probe (package bench) is measured on both in
// the same run.

type benchVariant struct {
	name string
	cfg  devserver.Config
}

type benchProbe struct {
	name string
	run  func(ctx context.Context, c, observer client.Client, n int) (bench.Latencies, error)
}

var benchProbes = []benchProbe{
	{"activity", func(ctx context.Context, c, _ client.Client, n int) (bench.Latencies, error) {
		return bench.MeasureActivityRoundTrip(ctx, c, "", n)
	}},
	{"activity-x50", func(ctx context.Context, c, _ client.Client, n int) (bench.Latencies, error) {
		return bench.MeasureConcurrentActivities(ctx, c, 50, n)
	}},
	{"signal-to-history", func(ctx context.Context, c, observer client.Client, n int) (bench.Latencies, error) {
		return bench.MeasureSignalToHistory(ctx, c, observer, n)
	}},
	{"signal-handled", func(ctx context.Context, c, observer client.Client, n int) (bench.Latencies, error) {
		return bench.MeasureSignalHandled(ctx, c, observer, "", n)
	}},
	{"query", func(ctx context.Context, c, _ client.Client, n int) (bench.Latencies, error) {
		return bench.MeasureQueryRoundTrip(ctx, c, "", n)
	}},
	{"update", func(ctx context.Context, c, _ client.Client, n int) (bench.Latencies, error) {
		return bench.MeasureUpdateRoundTrip(ctx, c, "", n)
	}},
}

// BenchmarkRoundTrip compares keel's tuned dynamic config with Temporal's
// stock one.
func BenchmarkRoundTrip(b *testing.B) {
	runLatencyBenchmark(b, []benchVariant{
		{"tuned", devserver.Config{}},
		{"untuned", devserver.Config{Untuned: true}},
	})
}

// BenchmarkTuning is the sweep behind the values in TunedDynamicConfig: the
// stock config with one change at a time, and the tuned one without each of
// its parts.
func BenchmarkTuning(b *testing.B) {
	pollRPS := func(rps int) map[string]any {
		return map[string]any{
			"history.transferProcessorMaxPollRPS":   rps,
			"history.timerProcessorMaxPollRPS":      rps,
			"history.visibilityProcessorMaxPollRPS": rps,
		}
	}
	tunedRPS := func(rps int) devserver.Config {
		cfg := devserver.Config{DynamicConfig: pollRPS(rps)}
		cfg.DynamicConfig["history.outboundProcessorMaxPollRPS"] = rps
		return cfg
	}
	runLatencyBenchmark(b, []benchVariant{
		{"stock", devserver.Config{Untuned: true}},
		{"stock+rps100", devserver.Config{Untuned: true, DynamicConfig: pollRPS(100)}},
		{"stock+rps1000", devserver.Config{Untuned: true, DynamicConfig: pollRPS(1000)}},
		{"tuned-no-eager", devserver.Config{DynamicConfig: map[string]any{"system.enableActivityEagerExecution": false}}},
		{"tuned-1-partition", devserver.Config{DynamicConfig: map[string]any{
			"matching.numTaskqueueReadPartitions":  1,
			"matching.numTaskqueueWritePartitions": 1,
		}}},
		{"tuned-rps200", tunedRPS(200)},
		{"tuned", devserver.Config{}},
		{"tuned-rps5000", tunedRPS(5000)},
		{"tuned-rollback-journal", devserver.Config{DataDir: "rollback"}},
		{"tuned-in-memory", devserver.Config{DataDir: "-"}},
	})
}

var benchOnly = flag.String("variants", "", "comma-separated variants of BenchmarkTuning to run (default all)")

func runLatencyBenchmark(b *testing.B, variants []benchVariant) {
	if *benchOnly != "" {
		only := strings.Split(*benchOnly, ",")
		variants = slices.DeleteFunc(variants, func(v benchVariant) bool { return !slices.Contains(only, v.name) })
		if len(variants) == 0 {
			b.Fatalf("no variant in -variants=%s", *benchOnly)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	type target struct{ c, observer client.Client }
	targets := make([]target, len(variants))
	for i, v := range variants {
		cfg := v.cfg
		var s *devserver.Server
		switch cfg.DataDir {
		case "":
			cfg.DataDir = b.TempDir()
			s = startBenchServer(b, ctx, cfg)
		case "-":
			cfg.DataDir = ""
			s = startBenchServer(b, ctx, cfg)
		case "rollback":
			// SQLite's defaults: a rollback journal and an fsync per commit.
			restore := devserver.SetFileConnectAttributes(map[string]string{"mode": "rwc"})
			cfg.DataDir = b.TempDir()
			s = startBenchServer(b, ctx, cfg)
			restore()
		}
		targets[i] = target{dial(b, ctx, s), dial(b, ctx, s)}
	}

	var tables strings.Builder
	defer func() { fmt.Print(tables.String()) }() // after the benchmark lines, not inside them
	for _, p := range benchProbes {
		b.Run(p.name, func(b *testing.B) {
			// Variants take turns in chunks, so a burst of load from
			// elsewhere on the machine hits all of them alike.
			lats := make([]bench.Latencies, len(variants))
			for done := 0; done < b.N; {
				n := min(benchChunk, b.N-done)
				for i := range variants {
					lat, err := p.run(ctx, targets[i].c, targets[i].observer, benchWarmUp+n)
					if err != nil {
						b.Fatalf("%s: %v", variants[i].name, err)
					}
					lats[i] = append(lats[i], lat[benchWarmUp:]...)
				}
				done += n
			}
			// ns/op is the first variant's mean round trip, not the
			// loop's time, which includes every variant and the setup.
			b.ReportMetric(float64(lats[0].Mean().Nanoseconds()), "ns/op")
			for i, v := range variants {
				b.ReportMetric(bench.Millis(lats[i].P50()), v.name+"-p50-ms")
				b.ReportMetric(bench.Millis(lats[i].P99()), v.name+"-p99-ms")
			}
			if b.N > 1 {
				writeTable(&tables, p.name, variants, lats)
			}
		})
	}
}

const (
	// benchChunk is how many round trips a variant measures before the
	// next variant takes its turn.
	benchChunk = 100
	// benchWarmUp round trips start every turn unmeasured. The history
	// task readers' rate limiters allow a burst as large as their rate (20
	// with the stock config), which refills while the other variants take
	// their turns; measuring from the first round trip would report the
	// burst instead of the sustained rate that back-to-back steps see.
	benchWarmUp = 40
)

func writeTable(out io.Writer, probe string, variants []benchVariant, lats []bench.Latencies) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\tn\tp50 ms\tp99 ms\tp50 / %[2]s\tp99 / %[2]s\t\n", probe, variants[0].name)
	for i, v := range variants {
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t\n", v.name, len(lats[i]), bench.Millis(lats[i].P50()), bench.Millis(lats[i].P99()),
			ratio(lats[i].P50(), lats[0].P50()), ratio(lats[i].P99(), lats[0].P99()))
	}
	_ = tw.Flush()
}

func startBenchServer(b *testing.B, ctx context.Context, cfg devserver.Config) *devserver.Server {
	b.Helper()
	cfg.Port, cfg.DisableUI = devserver.AnyPort, true
	s, err := devserver.Start(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := s.Stop(); err != nil {
			b.Error(err)
		}
	})
	return s
}

func dial(tb testing.TB, ctx context.Context, s *devserver.Server) client.Client {
	tb.Helper()
	c, err := s.Dial(ctx, client.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	return c
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
