package bench

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// MeasureSinks runs both shapes and checks what it should: every event
// of every session reached the sink, and each run's own events first
// reached it before the run's terminal event's (no figure is asserted:
// docs/performance.md has them).
func TestMeasureSinks(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := MeasureSinks(ctx, SinkOptions{Sessions: 4, Rounds: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Baseline) != 4 || len(rep.Sinks) != 4 {
		t.Fatalf("run times: %d baseline, %d with a sink", len(rep.Baseline), len(rep.Sinks))
	}
	if len(rep.Terminal) != 4 || len(rep.Lag) < 4*6 {
		t.Fatalf("the sink got %d events, %d terminal ones, of 4 sessions", len(rep.Lag), len(rep.Terminal))
	}
	if rep.SinkHistory.Bytes <= rep.BaselineHistory.Bytes {
		t.Fatalf("histories: %+v with a sink, %+v without", rep.SinkHistory, rep.BaselineHistory)
	}
	var out bytes.Buffer
	rep.Print(&out)
	if !strings.Contains(out.String(), "with a sink / baseline") {
		t.Fatalf("report:\n%s", out.String())
	}
	t.Log("\n" + out.String())
}

// BenchmarkSinks measures b.N sessions at once, three rounds of each
// shape (alternating, so that the machine's load falls on both):
//
//	go test -run '^$' -bench Sinks -benchtime 100x ./server/bench/
func BenchmarkSinks(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	rep, err := MeasureSinks(ctx, SinkOptions{Sessions: b.N, Rounds: 3, Progress: func(s string) { b.Log(s) }})
	if err != nil {
		b.Fatal(err)
	}
	rep.Lag.Report(b, "lag")
	rep.Terminal.Report(b, "terminal-lag")
	rep.Baseline.Report(b, "run-baseline")
	rep.Sinks.Report(b, "run-sink")
	b.ReportMetric(ratio(rep.Sinks.P50(), rep.Baseline.P50()), "run-p50-x-baseline")
	b.ReportMetric(ratio(rep.Sinks.P99(), rep.Baseline.P99()), "run-p99-x-baseline")
	// The table goes to stdout whole: the benchmark log would truncate it.
	rep.Print(os.Stdout)
}
