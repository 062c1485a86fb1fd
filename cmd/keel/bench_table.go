package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/keelrun/keel/devserver"
)

// figure is a measured latency distribution.
type figure struct {
	p50, p99 time.Duration
	n        int
	samples  devserver.Latencies
}

func newFigure(l devserver.Latencies) figure {
	return figure{p50: l.P50(), p99: l.P99(), n: len(l), samples: l}
}

// serverFigures are the figures taken on one server.
type serverFigures struct {
	bare, modelStep, toolStep, query, update figure
	deltaNATS, deltaMemory, durable          figure
}

// Ratios of p50s, the comparisons keel's targets are stated in.
func (f serverFigures) modelRatio() float64   { return ratio(f.modelStep.p50, f.bare.p50) }
func (f serverFigures) toolRatio() float64    { return ratio(f.toolStep.p50, 2*f.bare.p50) }
func (f serverFigures) durableRatio() float64 { return ratio(f.durable.p50, f.query.p50) }

func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// benchReport is what `keel bench` measured.
type benchReport struct {
	runs, steps    int
	workerProcess  bool
	tuned, untuned serverFigures
	// load is the machine's load average when the bench started, "" if
	// unknown: figures taken on a busy machine say so.
	load string
}

// The design's targets (docs/ARCHITECTURE.md, DESIGN.md "Quality bars").
const (
	targetModelRatio  = 1.5
	targetModelP50    = 15 * time.Millisecond
	targetDeltaP50    = 5 * time.Millisecond
	targetDeltaP99    = 25 * time.Millisecond
	targetDurableP50  = 20 * time.Millisecond
	verdictPass       = "PASS"
	verdictMiss       = "MISS"
	verdictNotApplied = "—"
)

// benchRow is one line of the table: a measure on both servers, its target
// and, per server the target applies to, the verdict.
type benchRow struct {
	key, label   string
	tuned, other string // formatted figures
	target       string
	// check says whether a server's figures meet the target; nil: no
	// target. untunedToo applies it to the untuned server as well.
	check      func(serverFigures) bool
	untunedToo bool
}

func (r *benchReport) rows() []benchRow {
	natsWhere := "worker in this process, own connections"
	if r.workerProcess {
		natsWhere = "worker in another process"
	}
	fig := func(key, label string, of func(serverFigures) figure) benchRow {
		return benchRow{key: key, label: label, tuned: fmtFigure(of(r.tuned)), other: fmtFigure(of(r.untuned))}
	}
	rat := func(key, label string, of func(serverFigures) float64) benchRow {
		return benchRow{key: key, label: label, tuned: fmtRatio(of(r.tuned)), other: fmtRatio(of(r.untuned))}
	}
	target := func(row benchRow, target string, untunedToo bool, check func(serverFigures) bool) benchRow {
		row.target, row.untunedToo, row.check = target, untunedToo, check
		return row
	}
	delta := func(of func(serverFigures) figure) func(serverFigures) bool {
		return func(f serverFigures) bool {
			d := of(f)
			return d.n > 0 && d.p50 <= targetDeltaP50 && d.p99 <= targetDeltaP99
		}
	}
	nats := func(f serverFigures) figure { return f.deltaNATS }
	mem := func(f serverFigures) figure { return f.deltaMemory }
	return []benchRow{
		fig("bare", "bare activity round trip", func(f serverFigures) figure { return f.bare }),
		target(fig("model_step", "model step (model turn only)", func(f serverFigures) figure { return f.modelStep }),
			"p50 ≤ 15 ms (tuned)", false, func(f serverFigures) bool { return f.modelStep.n > 0 && f.modelStep.p50 <= targetModelP50 }),
		target(rat("model_ratio", "  model step ÷ bare, p50", serverFigures.modelRatio),
			"≤ 1.5×", true, func(f serverFigures) bool { return f.modelRatio() > 0 && f.modelRatio() <= targetModelRatio }),
		fig("tool_step", "tool step (model turn + no-op tool)", func(f serverFigures) figure { return f.toolStep }),
		rat("tool_ratio", "  tool step ÷ (2 × bare), p50", serverFigures.toolRatio),
		fig("query", "query round trip", func(f serverFigures) figure { return f.query }),
		fig("update", "update round trip", func(f serverFigures) figure { return f.update }),
		target(fig("delta_nats", "delta via NATS ("+natsWhere+")", nats), "p50 ≤ 5 ms, p99 ≤ 25 ms", true, delta(nats)),
		target(fig("delta_memory", "delta in-process", mem), "p50 ≤ 5 ms, p99 ≤ 25 ms", true, delta(mem)),
		target(fig("durable", "durable event from commit", func(f serverFigures) figure { return f.durable }),
			"p50 ≤ 20 ms (tuned)", false, func(f serverFigures) bool { return f.durable.n > 0 && f.durable.p50 <= targetDurableP50 }),
		rat("durable_ratio", "  durable p50 ÷ query p50", serverFigures.durableRatio),
	}
}

// verdicts returns a row's verdict on the tuned and the untuned server:
// PASS, MISS, or "—" where the target does not apply.
func (r *benchReport) verdicts(row benchRow) (tuned, untuned string) {
	judge := func(f serverFigures) string {
		if row.check(f) {
			return verdictPass
		}
		return verdictMiss
	}
	tuned, untuned = verdictNotApplied, verdictNotApplied
	if row.check == nil {
		return
	}
	tuned = judge(r.tuned)
	if row.untunedToo {
		untuned = judge(r.untuned)
	}
	return
}

// writeTable prints the report as an aligned table.
func (r *benchReport) writeTable(w io.Writer) {
	fmt.Fprintf(w, "keel bench: %d %s × %d steps; embedded Temporal in memory, tuned and untuned; %s\n",
		r.runs, plural(r.runs, "run", "runs"), r.steps, r.machine())
	fmt.Fprintln(w, "latencies are p50 / p99 in ms; ratios compare p50s measured on the same server in the same run")
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "measure\ttuned\tuntuned\ttarget\tverdict (tuned / untuned)")
	for _, row := range r.rows() {
		vt, vu := r.verdicts(row)
		verdict := ""
		switch {
		case row.check == nil:
		case row.untunedToo:
			verdict = vt + " / " + vu
		default:
			verdict = vt
		}
		target := row.target
		if target == "" {
			target = verdictNotApplied
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", row.label, row.tuned, row.other, target, verdict)
	}
	_ = tw.Flush()
	t := r.tuned
	fmt.Fprintf(w, "\nsamples per server: %d model steps, %d tool steps, %d bare round trips, %d queries, %d updates, "+
		"%d deltas via NATS, %d in-process, %d durable events\n",
		t.modelStep.n, t.toolStep.n, t.bare.n, t.query.n, t.update.n, t.deltaNATS.n, t.deltaMemory.n, t.durable.n)
}

// machine describes where the figures were taken.
func (r *benchReport) machine() string {
	s := fmt.Sprintf("%s/%s, %d CPUs, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())
	if r.load != "" {
		s += ", load average " + r.load + " at start"
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

// fmtFigure formats a figure as "p50 / p99" in milliseconds.
func fmtFigure(f figure) string {
	if f.n == 0 {
		return "no samples"
	}
	return fmtMillis(f.p50) + " / " + fmtMillis(f.p99)
}

// fmtMillis shows a duration in milliseconds with three significant
// digits, so sub-millisecond deltas and 50 ms round trips read alike.
func fmtMillis(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	switch {
	case ms < 10:
		return fmt.Sprintf("%.2f", ms)
	case ms < 100:
		return fmt.Sprintf("%.1f", ms)
	}
	return fmt.Sprintf("%.0f", ms)
}

func fmtRatio(x float64) string { return fmt.Sprintf("%.2f×", x) }

// jsonFigure is a figure in the JSON report.
type jsonFigure struct {
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
	N   int     `json:"samples"`
}

type jsonServer struct {
	Figures map[string]jsonFigure `json:"figures"`
	Ratios  map[string]float64    `json:"ratios"`
}

type jsonTarget struct {
	Measure string `json:"measure"`
	Target  string `json:"target"`
	Tuned   string `json:"tuned"`
	Untuned string `json:"untuned"`
}

type jsonReport struct {
	Runs          int          `json:"runs"`
	Steps         int          `json:"steps"`
	WorkerProcess bool         `json:"worker_process"`
	Machine       string       `json:"machine"`
	Tuned         jsonServer   `json:"tuned"`
	Untuned       jsonServer   `json:"untuned"`
	Targets       []jsonTarget `json:"targets"`
}

func (r *benchReport) jsonReport() jsonReport {
	server := func(f serverFigures) jsonServer {
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		fig := func(x figure) jsonFigure { return jsonFigure{P50: ms(x.p50), P99: ms(x.p99), N: x.n} }
		return jsonServer{
			Figures: map[string]jsonFigure{
				"bare": fig(f.bare), "model_step": fig(f.modelStep), "tool_step": fig(f.toolStep),
				"query": fig(f.query), "update": fig(f.update),
				"delta_nats": fig(f.deltaNATS), "delta_memory": fig(f.deltaMemory), "durable": fig(f.durable),
			},
			Ratios: map[string]float64{
				"model_step_over_bare": f.modelRatio(), "tool_step_over_2bare": f.toolRatio(),
				"durable_over_query": f.durableRatio(),
			},
		}
	}
	out := jsonReport{
		Runs: r.runs, Steps: r.steps, WorkerProcess: r.workerProcess,
		Machine: r.machine(),
		Tuned:   server(r.tuned), Untuned: server(r.untuned),
	}
	for _, row := range r.rows() {
		if row.check == nil {
			continue
		}
		t, u := r.verdicts(row)
		out.Targets = append(out.Targets, jsonTarget{Measure: row.key, Target: strings.TrimSpace(row.target), Tuned: t, Untuned: u})
	}
	return out
}
