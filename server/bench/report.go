package bench

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"
)

// Figure summarizes a measured latency distribution.
type Figure struct {
	P50, P99 time.Duration
	// N is the number of samples; a Figure without samples has zero
	// percentiles and meets no target.
	N int
}

// NewFigure summarizes l.
func NewFigure(l Latencies) Figure {
	return Figure{P50: l.P50(), P99: l.P99(), N: len(l)}
}

// ServerFigures are the figures MeasureServer takes on one server.
type ServerFigures struct {
	// Bare is a bare activity round trip (MeasureActivityRoundTrip).
	Bare Figure
	// ModelStep is a keel model step: one model turn of a scripted model
	// whose tool call the workflow answers itself. ToolStep adds a no-op
	// tool activity to each step.
	ModelStep, ToolStep Figure
	// Query and Update are round trips to a cached running workflow.
	Query, Update Figure
	// DeltaNATS and DeltaMemory are streamed deltas from the provider
	// chunk in the activity to a client on its own connections, via NATS
	// and via the in-process channel; Durable is durable events from their
	// commit to that client (EventLatency).
	DeltaNATS, DeltaMemory, Durable Figure
}

// ModelRatio is the model step's p50 over the bare round trip's.
func (f ServerFigures) ModelRatio() float64 { return ratio(f.ModelStep.P50, f.Bare.P50) }

// ToolRatio is the tool step's p50 over two bare round trips' (a tool step
// runs two activities).
func (f ServerFigures) ToolRatio() float64 { return ratio(f.ToolStep.P50, 2*f.Bare.P50) }

// DurableRatio is the durable event latency's p50 over the query round
// trip's: what following history and reading events add to a query.
func (f ServerFigures) DurableRatio() float64 { return ratio(f.Durable.P50, f.Query.P50) }

func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// The targets keel is built to meet (docs/performance.md).
const (
	TargetModelRatio = 1.2
	TargetModelP50   = 15 * time.Millisecond
	TargetDeltaP50   = 5 * time.Millisecond
	TargetDeltaP99   = 10 * time.Millisecond
	TargetDurableP50 = 10 * time.Millisecond
)

// A Target is one of keel's performance targets and how a server's
// figures are judged against it.
type Target struct {
	// Measure names the figure or ratio judged: model_step, model_ratio,
	// delta_nats, delta_memory or durable.
	Measure string
	// Text states the target, for a reader.
	Text string
	// UntunedToo says the target applies to the untuned server as well
	// as the tuned one.
	UntunedToo bool
	// Met reports whether a server's figures meet the target.
	Met func(ServerFigures) bool
}

// Targets returns keel's performance targets in the order a report lists
// them.
func Targets() []Target {
	delta := func(of func(ServerFigures) Figure) func(ServerFigures) bool {
		return func(f ServerFigures) bool {
			d := of(f)
			return d.N > 0 && d.P50 <= TargetDeltaP50 && d.P99 <= TargetDeltaP99
		}
	}
	return []Target{
		{"model_step", "p50 ≤ 15 ms (tuned)", false,
			func(f ServerFigures) bool { return f.ModelStep.N > 0 && f.ModelStep.P50 <= TargetModelP50 }},
		{"model_ratio", "≤ 1.2×", true,
			func(f ServerFigures) bool { return f.ModelRatio() > 0 && f.ModelRatio() <= TargetModelRatio }},
		{"delta_nats", "p50 ≤ 5 ms, p99 ≤ 10 ms", true, delta(func(f ServerFigures) Figure { return f.DeltaNATS })},
		{"delta_memory", "p50 ≤ 5 ms, p99 ≤ 10 ms", true, delta(func(f ServerFigures) Figure { return f.DeltaMemory })},
		{"durable", "p50 ≤ 10 ms (tuned)", false,
			func(f ServerFigures) bool { return f.Durable.N > 0 && f.Durable.P50 <= TargetDurableP50 }},
	}
}

// Verdicts on a target.
const (
	Pass       = "PASS"
	Miss       = "MISS"
	NotApplied = "—"
)

// Report is what Run measured: the same figures on a tuned and an untuned
// server.
type Report struct {
	Runs, Steps int
	// WorkerProcess says the NATS deltas came from a worker in another
	// process.
	WorkerProcess  bool
	Tuned, Untuned ServerFigures
	// Load is the machine's one-minute load average when the run started,
	// "" if unknown: figures taken on a busy machine say so.
	Load string
}

// Verdicts returns t's verdict on the tuned and on the untuned server:
// Pass, Miss, or NotApplied where the target does not apply.
func (r *Report) Verdicts(t Target) (tuned, untuned string) {
	judge := func(f ServerFigures) string {
		if t.Met(f) {
			return Pass
		}
		return Miss
	}
	tuned, untuned = judge(r.Tuned), NotApplied
	if t.UntunedToo {
		untuned = judge(r.Untuned)
	}
	return tuned, untuned
}

// Machine describes where the figures were taken.
func (r *Report) Machine() string {
	s := fmt.Sprintf("%s/%s, %d CPUs, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())
	if r.Load != "" {
		s += ", load average " + r.Load + " at start"
	}
	return s
}

// loadAverage returns the one-minute load average, "" where unknown.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return ""
}
