package bench

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteTable prints the report: a summary line per number of sessions,
// then each measurement's accounting with keel and the baseline side by
// side, then the targets with their verdicts.
func (r *ConcurrencyReport) WriteTable(w io.Writer) {
	rev := r.Revision
	if rev == "" {
		rev = "unknown revision"
	}
	where := "workers in this process (their CPU counts as the server's)"
	if r.WorkerProcess {
		where = "each worker in a process of its own"
	}
	turns := make([]string, len(r.Turns))
	for i, d := range r.Turns {
		turns[i] = secs(d)
	}
	fmt.Fprintf(w, "keel-bench concurrency (%s): %s; %s\n", rev, r.Machine(), where)
	fmt.Fprintf(w, "each session: one send; its model streams %d chunks %v apart, calls list_files, streams %d more: %s of model time (%s)\n",
		StreamFirstChunks, StreamChunkDelay, StreamSecondChunks, secs(r.ModelTime), strings.Join(turns, " + "))
	fmt.Fprintf(w, "baseline: as many bare Temporal workflows, each running the same activities (one that streams (sleeps) as long as each model turn, a quick tool between them), without heartbeats\n")
	fmt.Fprintf(w, "update-with-start baseline: as many again, each started by an update-with-start whose update the workflow accepts at once, the call waiting for the acceptance (the fair baseline of a send), then its result\n")
	if r.CancelFraction > 0 {
		fmt.Fprintf(w, "%.0f%% of the sessions on each side are cancelled mid-stream; run times are over the others\n", 100*r.CancelFraction)
	}
	fmt.Fprintln(w)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "sessions\tkeel run p50 / p99\t÷ model time\tbare run p50 / p99\tkeel ÷ bare\tsend p50 / p99\tcancel p50 / p99\tbare cancel p50 / p99\tfailed")
	for _, p := range r.Points {
		k, b := p.Keel, p.Baseline
		r50, r99 := p.RunRatios()
		fmt.Fprintf(tw, "%d\t%s\t%.2f× / %.2f×\t%s\t%.2f× / %.2f×\t%s\t%s\t%s\t%d / %d\n", p.Sessions,
			pair(k.Runs, secs), ratio(k.Runs.P50(), r.ModelTime), ratio(k.Runs.P99(), r.ModelTime),
			pair(b.Runs, secs), r50, r99, pair(k.Starts, secs), pair(k.Cancels, millis), pair(b.Cancels, millis),
			k.Failed, b.Failed)
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "\nper run, keel / bare")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "sessions\tfrontend RPCs\theartbeats per turn\theartbeats/s\thistory events\tworkflow tasks per step\tbillable actions (keel ÷ bare)\tpersistence writes\tCPU s server process\tCPU s worker")
	for _, p := range r.Points {
		k, b := p.Keel, p.Baseline
		_, kw := k.PersistencePerRun()
		_, bw := b.PersistencePerRun()
		ks, kwk := k.CPUPerRun()
		bs, bwk := b.CPUPerRun()
		overBare, _ := p.ActionRatios()
		fmt.Fprintf(tw, "%d\t%s / %s\t%s\t%s\t%s / %s\t%s / %s\t%s / %s (%.2f×)\t%s / %s\t%s / %s\t%s / %s\n", p.Sessions,
			trim(k.RPCsPerRun()), trim(b.RPCsPerRun()), trim(k.HeartbeatsPerTurn()), trim(k.HeartbeatsPerSecond()),
			trim(k.History.EventsPerRun()), trim(b.History.EventsPerRun()),
			trim(k.History.WorkflowTasksPerStep()), trim(b.History.WorkflowTasksPerStep()),
			trim(k.ActionsPerRun()), trim(b.ActionsPerRun()), overBare,
			trim(kw), trim(bw), cpu(ks), cpu(bs), cpu(kwk), cpu(bwk))
	}
	_ = tw.Flush()

	r.writeSends(w)
	r.writeShaped(w)

	for _, p := range r.Points {
		fmt.Fprintf(w, "\n%d sessions: per run, keel beside the bare baseline\n", p.Sessions)
		r.writePoint(w, p)
		writeActions(w, p)
	}

	fmt.Fprintln(w, "\ntargets")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, t := range ConcurrencyTargets() {
		at := "every N"
		if t.Sessions != 0 {
			at = fmt.Sprintf("at %d", t.Sessions)
		}
		v, detail := r.Verdict(t)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Text, at, v, detail)
	}
	_ = tw.Flush()
}

// writePoint prints one measurement's figures, keel beside the baseline.
func (r *ConcurrencyReport) writePoint(w io.Writer, p ConcurrencyPoint) {
	k, b := p.Keel, p.Baseline
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  measure\tkeel\tbare\tkeel ÷ bare")
	row := func(label, kv, bv string, rat float64) {
		rs := ""
		if rat > 0 {
			rs = fmt.Sprintf("%.2f×", rat)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", label, kv, bv, rs)
	}
	num := func(label string, kv, bv float64) {
		rat := 0.0
		if bv > 0 {
			rat = kv / bv
		}
		row(label, trim(kv), trim(bv), rat)
	}
	ended := func(f PhaseFigures) string {
		s := fmt.Sprintf("%d completed, %d cancelled, %d failed", f.Completed, f.Cancelled, f.Failed)
		if f.CancelMissed > 0 {
			s += fmt.Sprintf(", %d completed before their cancel", f.CancelMissed)
		}
		return s
	}
	row("sessions", ended(k), ended(b), 0)
	r50, r99 := p.RunRatios()
	fmt.Fprintf(tw, "  run time p50 / p99\t%s\t%s\t%.2f× / %.2f×\n", pair(k.Runs, secs), pair(b.Runs, secs), r50, r99)
	row("run ÷ model time, p50 / p99",
		fmt.Sprintf("%.2f× / %.2f×", ratio(k.Runs.P50(), r.ModelTime), ratio(k.Runs.P99(), r.ModelTime)),
		fmt.Sprintf("%.2f× / %.2f×", ratio(b.Runs.P50(), r.ModelTime), ratio(b.Runs.P99(), r.ModelTime)), 0)
	row("send / start call p50 / p99", pair(k.Starts, secs), pair(b.Starts, secs), 0)
	row("cancel → outcome p50 / p99", pair(k.Cancels, millis), pair(b.Cancels, millis), 0)
	row("wall time, first start to last outcome", secs(k.Wall), secs(b.Wall), 0)
	num("frontend RPCs (clients: the benchmark's sends, outcomes, cancels)", k.RPCsPerRun(), b.RPCsPerRun())
	for _, m := range unionKeys(k.Server.RPCs, b.Server.RPCs) {
		kv, bv := per(k.Server.RPCs[m], k.Sessions()), per(b.Server.RPCs[m], b.Sessions())
		if kv < 0.05 && bv < 0.05 {
			continue
		}
		kc, bc := per(k.ClientRPCs[m], k.Sessions()), per(b.ClientRPCs[m], b.Sessions())
		row("  "+m, trim(kv)+fromClients(kv, kc), trim(bv)+fromClients(bv, bc), ratioF(kv, bv))
	}
	row("frontend time per call p50 / p99 (long polls wait)", "", "", 0)
	for _, m := range unionKeys(k.Server.RPCs, b.Server.RPCs) {
		kt, bt := k.ServerTimes[m], b.ServerTimes[m]
		if isTaskCount(m) || (len(kt) == 0 && len(bt) == 0) {
			continue
		}
		row("  "+m, pair(kt, millis), pair(bt, millis), 0)
	}
	row("activity heartbeats, by activity type", "", "", 0)
	for _, t := range unionKeys(k.Server.Heartbeats, b.Server.Heartbeats) {
		num("  "+t, per(k.Server.Heartbeats[t], k.Sessions()), per(b.Server.Heartbeats[t], b.Sessions()))
	}
	meanTurn := func(f PhaseFigures) string {
		if f.StreamTurns == 0 {
			return "—"
		}
		return fmt.Sprintf("%d, %s each", f.StreamTurns, secs(f.StreamTime/time.Duration(f.StreamTurns)))
	}
	row("streaming activities (all runs), mean start to close", meanTurn(k), meanTurn(b), 0)
	num("heartbeats per streaming turn", k.HeartbeatsPerTurn(), b.HeartbeatsPerTurn())
	num("heartbeats per second of a streaming turn", k.HeartbeatsPerSecond(), b.HeartbeatsPerSecond())
	num("history events (completed runs)", k.History.EventsPerRun(), b.History.EventsPerRun())
	wf := func(f PhaseFigures, wh WorkflowHistory) string {
		return fmt.Sprintf("%s events, %s workflow tasks", trim(per(wh.Events, f.History.Runs)), trim(per(wh.WorkflowTasks, f.History.Runs)))
	}
	for _, wh := range k.History.Workflows {
		if wh.Events > 0 {
			row("  "+wh.Kind+" workflow", wf(k, wh), "", 0)
		}
	}
	for _, wh := range b.History.Workflows {
		row("  bare workflow", "", wf(b, wh), 0)
	}
	num("workflow tasks per step", k.History.WorkflowTasksPerStep(), b.History.WorkflowTasksPerStep())
	row("history events by type", "", "", 0)
	for _, t := range unionKeys(k.History.Events, b.History.Events) {
		num("  "+t, per(k.History.Events[t], k.History.Runs), per(b.History.Events[t], b.History.Runs))
	}
	ka, kw := k.PersistencePerRun()
	ba, bw := b.PersistencePerRun()
	num("persistence requests", ka, ba)
	num("  of which writes", kw, bw)
	for _, op := range unionKeys(k.Server.Persistence, b.Server.Persistence) {
		if !PersistenceWrite(op) {
			continue
		}
		kv, bv := per(k.Server.Persistence[op], k.Sessions()), per(b.Server.Persistence[op], b.Sessions())
		if kv < 0.05 && bv < 0.05 {
			continue
		}
		num("    "+op, kv, bv)
	}
	ks, kwk := k.CPUPerRun()
	bs, bwk := b.CPUPerRun()
	row("CPU s: server process (Temporal, NATS, clients)", cpu(ks), cpu(bs), ratioF(ks, bs))
	row("CPU s: worker process", cpu(kwk), cpu(bwk), ratioF(kwk, bwk))
	num("server warnings", per(k.Server.Warnings.Total(), k.Sessions()), per(b.Server.Warnings.Total(), b.Sessions()))
	_ = tw.Flush()
	for _, side := range []struct {
		name string
		c    Counts
	}{{"keel", k.Server.Warnings}, {"bare", b.Server.Warnings}} {
		if len(side.c) > 0 {
			fmt.Fprintf(w, "  server warnings (%s): %s\n", side.name, warnings(side.c))
		}
	}
	for _, f := range []PhaseFigures{k, b} {
		for _, e := range f.Errors {
			fmt.Fprintf(w, "  error: %s\n", e)
		}
	}
}

// fromClients says how much of a count came from the benchmark's clients.
func fromClients(all, clients float64) string {
	if clients < 0.005 || all == 0 {
		return ""
	}
	return " (clients " + trim(clients) + ")"
}

func pair(l Latencies, f func(time.Duration) string) string {
	if len(l) == 0 {
		return "—"
	}
	return f(l.P50()) + " / " + f(l.P99())
}

func trim(x float64) string {
	switch {
	case x == 0:
		return "0"
	case x < 10:
		return fmt.Sprintf("%.2f", x)
	case x < 100:
		return fmt.Sprintf("%.1f", x)
	}
	return fmt.Sprintf("%.0f", x)
}

func cpu(s float64) string {
	if s < 0 {
		return "—"
	}
	return fmt.Sprintf("%.3f", s)
}

func ratioF(a, b float64) float64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	return a / b
}

func warnings(c Counts) string {
	if len(c) == 0 {
		return "0"
	}
	keys := unionKeys(c, nil)
	var parts []string
	for _, k := range keys[:min(len(keys), 5)] {
		parts = append(parts, fmt.Sprintf("%d %q", c[k], k))
	}
	return fmt.Sprintf("%d: %s", c.Total(), strings.Join(parts, ", "))
}

// unionKeys returns the names counted in a or b, the largest counts (in a,
// then in b) first.
func unionKeys(a, b Counts) []string {
	var keys []string
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(x, y string) int {
		return cmp.Or(cmp.Compare(a[y], a[x]), cmp.Compare(b[y], b[x]), strings.Compare(x, y))
	})
	return keys
}

// writeSends prints each way of driving sessions beside the
// update-with-start baseline (and the bare start): keel's Go client, and
// a foreign client when measured.
func (r *ConcurrencyReport) writeSends(w io.Writer) {
	codec := ""
	if r.RemoteCodec {
		codec = "; both through a payload codec calling the codec endpoint over HTTP"
	}
	fmt.Fprintln(w, "\nsends and runs beside the update-with-start baseline; foreign client: keel driven with Temporal's own client alone (update-with-start of send, then the outcome update)"+codec)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "sessions\tdriven by\tsend p50 / p99\tsend p99 ÷ bare update-with-start p99\trun p50 / p99\t÷ bare update-with-start\t÷ bare start\tcancel p50 / p99\tfrontend RPCs\tbillable actions\tfailed")
	for _, p := range r.Points {
		u, b := p.BaselineUWS, p.Baseline
		for _, side := range []struct {
			name string
			f    *PhaseFigures
		}{{"bare update-with-start", &p.BaselineUWS}, {"keel, Go client", &p.Keel}, {"keel, foreign client", p.Foreign}} {
			f := side.f
			if f == nil {
				continue
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%.2f×\t%s\t%.2f× / %.2f×\t%.2f× / %.2f×\t%s\t%s\t%s\t%d\n", p.Sessions, side.name,
				pair(f.Starts, secs), ratio(f.Starts.P99(), u.Starts.P99()), pair(f.Runs, secs),
				ratio(f.Runs.P50(), u.Runs.P50()), ratio(f.Runs.P99(), u.Runs.P99()),
				ratio(f.Runs.P50(), b.Runs.P50()), ratio(f.Runs.P99(), b.Runs.P99()),
				pair(f.Cancels, millis), trim(f.RPCsPerRun()), trim(f.ActionsPerRun()), f.Failed)
		}
	}
	_ = tw.Flush()
	for _, p := range r.Points {
		for _, f := range []*PhaseFigures{&p.BaselineUWS, p.Foreign} {
			for _, e := range f.errors() {
				fmt.Fprintf(w, "  error (%d sessions): %s\n", p.Sessions, e)
			}
		}
	}
}

// writeShaped prints the shaped baseline beside keel and the bare one, if
// it was measured.
func (r *ConcurrencyReport) writeShaped(w io.Writer) {
	if !slices.ContainsFunc(r.Points, func(p ConcurrencyPoint) bool { return p.Shaped != nil }) {
		return
	}
	fmt.Fprintln(w, "\nshaped: bare Temporal in keel's shape (a session started by update-with-start, a child run per send, the tool call as an activity), without keel")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "sessions\tshaped run p50 / p99\tshaped ÷ bare\tkeel ÷ shaped\tshaped send p50 / p99\tfrontend RPCs\thistory events\tworkflow tasks per step\tbillable actions (keel ÷ shaped)\tpersistence writes\tCPU s server process\tfailed")
	for _, p := range r.Points {
		sh := p.Shaped
		if sh == nil {
			continue
		}
		_, writes := sh.PersistencePerRun()
		server, _ := sh.CPUPerRun()
		_, overShaped := p.ActionRatios()
		fmt.Fprintf(tw, "%d\t%s\t%.2f× / %.2f×\t%.2f× / %.2f×\t%s\t%s\t%s\t%s\t%s (%.2f×)\t%s\t%s\t%d\n", p.Sessions, pair(sh.Runs, secs),
			ratio(sh.Runs.P50(), p.Baseline.Runs.P50()), ratio(sh.Runs.P99(), p.Baseline.Runs.P99()),
			ratio(p.Keel.Runs.P50(), sh.Runs.P50()), ratio(p.Keel.Runs.P99(), sh.Runs.P99()),
			pair(sh.Starts, secs), trim(sh.RPCsPerRun()), trim(sh.History.EventsPerRun()),
			trim(sh.History.WorkflowTasksPerStep()), trim(sh.ActionsPerRun()), overShaped, trim(writes), cpu(server), sh.Failed)
	}
	_ = tw.Flush()
}

// writeActions prints one measurement's billable actions per run by type,
// keel beside the shaped baseline (when measured) and the bare one, with
// keel's ratios to each: what the same activities cost on Temporal Cloud's
// bill in each shape.
func writeActions(w io.Writer, p ConcurrencyPoint) {
	sides := []PhaseFigures{p.Keel}
	head := "  billable actions per run, by type\tkeel"
	if p.Foreign != nil {
		sides = append(sides, *p.Foreign)
		head += "\tkeel, foreign client"
	}
	if p.Shaped != nil {
		sides = append(sides, *p.Shaped)
		head += "\tshaped"
	}
	sides = append(sides, p.Baseline, p.BaselineUWS)
	all := Counts{}
	for _, f := range sides {
		for t, n := range f.Server.Actions {
			all[t] += n
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, head+"\tbare\tbare update-with-start")
	row := func(label string, value func(PhaseFigures) float64) {
		fmt.Fprint(tw, "  "+label)
		for _, f := range sides {
			fmt.Fprint(tw, "\t"+trim(value(f)))
		}
		fmt.Fprintln(tw)
	}
	for _, t := range unionKeys(all, nil) {
		row("  "+t, func(f PhaseFigures) float64 { return per(f.Server.Actions[t], f.Sessions()) })
	}
	row("all", PhaseFigures.ActionsPerRun)
	_ = tw.Flush()
	overBare, overShaped := p.ActionRatios()
	fmt.Fprintf(w, "  billable actions, keel ÷ bare: %.2f×", overBare)
	if p.Shaped != nil {
		fmt.Fprintf(w, "; keel ÷ shaped: %.2f×", overShaped)
	}
	if p.Foreign != nil {
		fmt.Fprintf(w, "; foreign client ÷ bare update-with-start: %.2f×", ratioF(p.Foreign.ActionsPerRun(), p.BaselineUWS.ActionsPerRun()))
	}
	fmt.Fprintln(w)
}
