package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
)

// How keel eval prints an eval: its progress on a terminal, and its
// report as a table.

// evalProgressEvery is how often the progress bar asks the eval.
const evalProgressEvery = 500 * time.Millisecond

// showProgress draws the eval's progress on w while it runs, when w is a
// terminal; stop erases it.
func showProgress(ctx context.Context, ev *client.Eval, w io.Writer) (stop func()) {
	if !isTerminal(w) {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(evalProgressEvery)
		defer t.Stop()
		for {
			if st, err := ev.Status(ctx); err == nil && st.State == api.EvalRunning {
				fmt.Fprintf(w, "\r\033[K%s", progressLine(st, 30))
			}
			select {
			case <-ctx.Done():
				fmt.Fprint(w, "\r\033[K")
				return
			case <-t.C:
			}
		}
	}()
	return func() { cancel(); <-done }
}

// progressLine is a bar of width cells and the eval's counts.
func progressLine(st api.EvalStatus, width int) string {
	filled := 0
	if st.Total > 0 {
		filled = st.Done * width / st.Total
	}
	return fmt.Sprintf("[%s%s] %d/%d cases · %d running · %d passed · %d failed · %s",
		strings.Repeat("█", filled), strings.Repeat("·", width-filled), st.Done, st.Total, st.Running, st.Passed, st.Failed, usageNote(st.Usage))
}

// usageNote is tokens and cost in a few words.
func usageNote(u keel.Usage) string {
	s := fmt.Sprintf("%d tokens", u.InputTokens+u.OutputTokens)
	if len(u.Cost) > 0 {
		s += " · " + u.Cost.String()
	}
	return s
}

// writeEvalReport prints the totals side by side, then each case,
// regressions first, then the details of each case that regressed or
// failed: its scorers' reasons, its tool calls and the diff of the two
// answers.
func writeEvalReport(w io.Writer, rep api.EvalReport) {
	fmt.Fprintf(w, "eval %s\n\n", sanitizeLine(rep.ID))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	b := rep.Baseline
	row := func(name string, f func(t api.EvalTotals) string) {
		if b == nil {
			fmt.Fprintf(tw, "%s\t%s\n", name, f(rep.Candidate))
			return
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", name, f(rep.Candidate), f(*b))
	}
	if b != nil {
		fmt.Fprintf(tw, "\tcandidate\tbaseline\n")
	}
	row("pass rate", func(t api.EvalTotals) string {
		return fmt.Sprintf("%.1f%% (%d/%d)", 100*t.PassRate, t.Passed, t.Cases-t.Skipped)
	})
	row("failed / errors / skipped", func(t api.EvalTotals) string { return fmt.Sprintf("%d / %d / %d", t.Failed, t.Errors, t.Skipped) })
	row("mean score", func(t api.EvalTotals) string { return fmt.Sprintf("%.3f", t.MeanScore) })
	row("scores 0→1", func(t api.EvalTotals) string { return histogram(t.Histogram) })
	row("tokens in/out", func(t api.EvalTotals) string {
		return fmt.Sprintf("%d / %d", t.Usage.InputTokens, t.Usage.OutputTokens)
	})
	row("cost", func(t api.EvalTotals) string { return costText(t.Usage) })
	row("judge cost", func(t api.EvalTotals) string { return costText(t.JudgeUsage) })
	row("duration p50 / p99", func(t api.EvalTotals) string {
		return t.DurationP50.Std().Round(time.Millisecond).String() + " / " + t.DurationP99.Std().Round(time.Millisecond).String()
	})
	_ = tw.Flush()
	if b != nil {
		fmt.Fprintf(w, "\n%d regressed · %d improved\n", rep.Regressions, rep.Improvements)
	}
	if rep.BudgetSpent {
		fmt.Fprintln(w, "the eval's budget was spent: the cases left did not run")
	}
	if rep.Cancelled {
		fmt.Fprintln(w, "the eval was cancelled: the cases left did not run")
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "case\tchange\tcandidate\tbaseline\n")
	for _, c := range rep.Cases {
		base := ""
		if c.Baseline != nil {
			base = sideText(*c.Baseline)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", sanitizeLine(oneLine(c.ID, 40)), c.Change, sideText(c.Candidate), base)
	}
	_ = tw.Flush()
	for _, c := range rep.Cases {
		if c.Change == api.EvalRegressed || (!c.Candidate.Pass && !c.Candidate.Skipped) {
			writeCaseDetail(w, c)
		}
	}
}

// sideText is a side in a few words: pass or fail and its score.
func sideText(s api.EvalSide) string {
	switch {
	case s.Skipped:
		return "skipped"
	case s.Error != nil:
		return "error: " + oneLine(s.Error.Message, 40)
	case s.Pass:
		return "pass " + strconv.FormatFloat(s.Score, 'f', 2, 64)
	}
	return "fail " + strconv.FormatFloat(s.Score, 'f', 2, 64)
}

// writeCaseDetail prints why a case failed or regressed.
func writeCaseDetail(w io.Writer, c api.EvalCaseResult) {
	fmt.Fprintf(w, "\n── %s (%s)\n", sanitizeLine(oneLine(c.ID, 60)), strings.TrimSpace(c.Change+" "+sideText(c.Candidate)))
	fmt.Fprintf(w, "prompt: %s\n", sanitizeLine(oneLine(c.Prompt, 100)))
	sides := []struct {
		label string
		s     *api.EvalSide
	}{{"candidate", &c.Candidate}, {"baseline", c.Baseline}}
	for _, sd := range sides {
		if sd.s == nil {
			continue
		}
		for _, sc := range sd.s.Scores {
			if sc.Pass && sc.Error == "" {
				continue
			}
			why := sc.Reason
			if sc.Error != "" {
				why = "error: " + sc.Error
			}
			fmt.Fprintf(w, "  %s %s: %s\n", sd.label, sc.Scorer, sanitizeLine(oneLine(why, 120)))
		}
		if r := sd.s.Run; r != nil {
			for _, t := range r.Tools {
				fmt.Fprintf(w, "  %s tool %s %s → %s\n", sd.label, sanitize(t.Name), sanitize(oneLine(string(t.Arguments), 80)), sanitize(t.Status))
			}
		}
	}
	if c.Baseline == nil || c.Baseline.Run == nil || c.Candidate.Run == nil {
		return
	}
	fmt.Fprintf(w, "  answer (- baseline, + candidate):\n")
	for _, l := range diffLines(lines(c.Baseline.Run.Answer), lines(c.Candidate.Run.Answer)) {
		fmt.Fprintf(w, "    %s\n", sanitize(l))
	}
}

// histogram draws ten buckets' counts as bars.
func histogram(h [10]int) string {
	bars := []rune(" ▁▂▃▄▅▆▇█")
	top := 0
	for _, n := range h {
		top = max(top, n)
	}
	var b strings.Builder
	for _, n := range h {
		i := 0
		if top > 0 {
			i = (n*(len(bars)-1) + top - 1) / top
		}
		b.WriteRune(bars[i])
	}
	return "|" + b.String() + "|"
}

func costText(u keel.Usage) string {
	if len(u.Cost) == 0 {
		if u.Requests == 0 {
			return "-"
		}
		return "unpriced"
	}
	return u.Cost.String()
}
