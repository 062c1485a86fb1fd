package devserver

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"go.temporal.io/sdk/client"
)

// Run with (docs/devserver.md has the figures):
//
//	go test ./devserver -run '^$' -bench RoundTrip -benchtime 200x
//
// Both servers run side by side in the process, each on its own SQLite file
// as keel dev does, and every probe is measured on both in the same run.

type benchVariant struct {
	name string
	cfg  Config
}

type benchProbe struct {
	name string
	run  func(ctx context.Context, c, observer client.Client, n int) (Latencies, error)
}

var benchProbes = []benchProbe{
	{"activity", func(ctx context.Context, c, _ client.Client, n int) (Latencies, error) {
		return MeasureActivityRoundTrip(ctx, c, "", n)
	}},
	{"signal-to-history", func(ctx context.Context, c, observer client.Client, n int) (Latencies, error) {
		return MeasureSignalToHistory(ctx, c, observer, n)
	}},
	{"query", func(ctx context.Context, c, _ client.Client, n int) (Latencies, error) {
		return MeasureQueryRoundTrip(ctx, c, "", n)
	}},
	{"update", func(ctx context.Context, c, _ client.Client, n int) (Latencies, error) {
		return MeasureUpdateRoundTrip(ctx, c, "", n)
	}},
}

// BenchmarkRoundTrip compares keel's tuned dynamic config with Temporal's
// stock one.
func BenchmarkRoundTrip(b *testing.B) {
	runLatencyBenchmark(b, []benchVariant{
		{"tuned", Config{}},
		{"untuned", Config{Untuned: true}},
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
	runLatencyBenchmark(b, []benchVariant{
		{"stock", Config{Untuned: true}},
		{"stock+rps100", Config{Untuned: true, DynamicConfig: pollRPS(100)}},
		{"stock+rps1000", Config{Untuned: true, DynamicConfig: pollRPS(1000)}},
		{"stock+rps10000", Config{Untuned: true, DynamicConfig: pollRPS(10000)}},
		{"tuned-no-eager", Config{DynamicConfig: map[string]any{"system.enableActivityEagerExecution": false}}},
		{"tuned-4-partitions", Config{DynamicConfig: map[string]any{
			"matching.numTaskqueueReadPartitions":  4,
			"matching.numTaskqueueWritePartitions": 4,
		}}},
		{"tuned", Config{}},
		{"tuned-in-memory", Config{DataDir: "-"}},
	})
}

func runLatencyBenchmark(b *testing.B, variants []benchVariant) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	type target struct{ c, observer client.Client }
	targets := make([]target, len(variants))
	for i, v := range variants {
		cfg := v.cfg
		switch cfg.DataDir {
		case "":
			cfg.DataDir = b.TempDir()
		case "-":
			cfg.DataDir = ""
		}
		s := startBenchServer(b, ctx, cfg)
		targets[i] = target{dial(b, ctx, s), dial(b, ctx, s)}
	}

	var tables strings.Builder
	defer func() { fmt.Print(tables.String()) }() // after the benchmark lines, not inside them
	for _, p := range benchProbes {
		b.Run(p.name, func(b *testing.B) {
			// Variants take turns in chunks, so a burst of load from
			// elsewhere on the machine hits all of them alike.
			lats := make([]Latencies, len(variants))
			for done := 0; done < b.N; {
				n := min(benchChunk, b.N-done)
				for i := range variants {
					lat, err := p.run(ctx, targets[i].c, targets[i].observer, n)
					if err != nil {
						b.Fatalf("%s: %v", variants[i].name, err)
					}
					lats[i] = append(lats[i], lat...)
				}
				done += n
			}
			// ns/op is the first variant's mean round trip, not the
			// loop's time, which includes every variant and the setup.
			b.ReportMetric(float64(lats[0].Mean().Nanoseconds()), "ns/op")
			for i, v := range variants {
				b.ReportMetric(ms(lats[i].P50()), v.name+"-p50-ms")
				b.ReportMetric(ms(lats[i].P99()), v.name+"-p99-ms")
			}
			if b.N > 1 {
				writeTable(&tables, p.name, variants, lats)
			}
		})
	}
}

// benchChunk is how many round trips a variant measures before the next
// variant takes its turn.
const benchChunk = 25

func writeTable(out io.Writer, probe string, variants []benchVariant, lats []Latencies) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\tn\tp50 ms\tp99 ms\tp50 / %[2]s\tp99 / %[2]s\t\n", probe, variants[0].name)
	for i, v := range variants {
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t\n", v.name, len(lats[i]), ms(lats[i].P50()), ms(lats[i].P99()),
			ratio(lats[i].P50(), lats[0].P50()), ratio(lats[i].P99(), lats[0].P99()))
	}
	_ = tw.Flush()
}

func startBenchServer(b *testing.B, ctx context.Context, cfg Config) *Server {
	b.Helper()
	cfg.Port, cfg.DisableUI = AnyPort, true
	s, err := Start(ctx, cfg)
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

func dial(tb testing.TB, ctx context.Context, s *Server) client.Client {
	tb.Helper()
	c, err := s.Dial(ctx, client.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	return c
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
