package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/keelrun/keel/server/bench"
)

// benchRow is one line of the table: a measure on both servers and, when
// one of keel's targets judges it, that target.
type benchRow struct {
	label        string
	tuned, other string // formatted figures
	target       *bench.Target
}

func benchRows(r *bench.Report) []benchRow {
	natsWhere := "worker in this process, own connections"
	if r.WorkerProcess {
		natsWhere = "worker in another process"
	}
	targets := map[string]*bench.Target{}
	for _, t := range bench.Targets() {
		targets[t.Measure] = &t
	}
	fig := func(key, label string, of func(bench.ServerFigures) bench.Figure) benchRow {
		return benchRow{label: label, tuned: fmtFigure(of(r.Tuned)), other: fmtFigure(of(r.Untuned)), target: targets[key]}
	}
	rat := func(key, label string, of func(bench.ServerFigures) float64) benchRow {
		return benchRow{label: label, tuned: fmtRatio(of(r.Tuned)), other: fmtRatio(of(r.Untuned)), target: targets[key]}
	}
	return []benchRow{
		fig("bare", "bare activity round trip", func(f bench.ServerFigures) bench.Figure { return f.Bare }),
		fig("model_step", "model step (model turn only)", func(f bench.ServerFigures) bench.Figure { return f.ModelStep }),
		rat("model_ratio", "  model step ÷ bare, p50", bench.ServerFigures.ModelRatio),
		fig("tool_step", "tool step (model turn + no-op tool)", func(f bench.ServerFigures) bench.Figure { return f.ToolStep }),
		rat("tool_ratio", "  tool step ÷ (2 × bare), p50", bench.ServerFigures.ToolRatio),
		fig("query", "query round trip", func(f bench.ServerFigures) bench.Figure { return f.Query }),
		fig("update", "update round trip", func(f bench.ServerFigures) bench.Figure { return f.Update }),
		fig("delta_nats", "delta via NATS ("+natsWhere+")", func(f bench.ServerFigures) bench.Figure { return f.DeltaNATS }),
		fig("delta_memory", "delta in-process", func(f bench.ServerFigures) bench.Figure { return f.DeltaMemory }),
		fig("durable", "durable event from commit", func(f bench.ServerFigures) bench.Figure { return f.Durable }),
		rat("durable_ratio", "  durable p50 ÷ query p50", bench.ServerFigures.DurableRatio),
	}
}

// writeBenchTable prints the report as an aligned table.
func writeBenchTable(w io.Writer, r *bench.Report) {
	fmt.Fprintf(w, "keel-bench: %d %s × %d steps; embedded Temporal in memory, tuned and untuned; %s\n",
		r.Runs, plural(r.Runs, "run", "runs"), r.Steps, r.Machine())
	fmt.Fprintln(w, "latencies are p50 / p99 in ms; ratios compare p50s measured on the same server in the same run")
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "measure\ttuned\tuntuned\ttarget\tverdict (tuned / untuned)")
	for _, row := range benchRows(r) {
		target, verdict := bench.NotApplied, ""
		if t := row.target; t != nil {
			target = t.Text
			vt, vu := r.Verdicts(*t)
			verdict = vt
			if t.UntunedToo {
				verdict = vt + " / " + vu
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", row.label, row.tuned, row.other, target, verdict)
	}
	_ = tw.Flush()
	t := r.Tuned
	fmt.Fprintf(w, "\nsamples per server: %d model steps, %d tool steps, %d bare round trips, %d queries, %d updates, "+
		"%d deltas via NATS, %d in-process, %d durable events\n",
		t.ModelStep.N, t.ToolStep.N, t.Bare.N, t.Query.N, t.Update.N, t.DeltaNATS.N, t.DeltaMemory.N, t.Durable.N)
}

// fmtFigure formats a figure as "p50 / p99" in milliseconds.
func fmtFigure(f bench.Figure) string {
	if f.N == 0 {
		return "no samples"
	}
	return fmtMillis(f.P50) + " / " + fmtMillis(f.P99)
}

// fmtMillis shows a duration in milliseconds with three significant
// digits, so sub-millisecond deltas and 50 ms round trips read alike.
func fmtMillis(d time.Duration) string {
	ms := bench.Millis(d)
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

// benchJSON is the report as `keel-bench --json` prints it.
func benchJSON(r *bench.Report) jsonReport {
	server := func(f bench.ServerFigures) jsonServer {
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		fig := func(x bench.Figure) jsonFigure { return jsonFigure{P50: ms(x.P50), P99: ms(x.P99), N: x.N} }
		return jsonServer{
			Figures: map[string]jsonFigure{
				"bare": fig(f.Bare), "model_step": fig(f.ModelStep), "tool_step": fig(f.ToolStep),
				"query": fig(f.Query), "update": fig(f.Update),
				"delta_nats": fig(f.DeltaNATS), "delta_memory": fig(f.DeltaMemory), "durable": fig(f.Durable),
			},
			Ratios: map[string]float64{
				"model_step_over_bare": f.ModelRatio(), "tool_step_over_2bare": f.ToolRatio(),
				"durable_over_query": f.DurableRatio(),
			},
		}
	}
	out := jsonReport{
		Runs: r.Runs, Steps: r.Steps, WorkerProcess: r.WorkerProcess,
		Machine: r.Machine(),
		Tuned:   server(r.Tuned), Untuned: server(r.Untuned),
	}
	for _, t := range bench.Targets() {
		vt, vu := r.Verdicts(t)
		out.Targets = append(out.Targets, jsonTarget{Measure: t.Measure, Target: strings.TrimSpace(t.Text), Tuned: vt, Untuned: vu})
	}
	return out
}
