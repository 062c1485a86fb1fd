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
	"github.com/keelrun/keel/server/internal/sessionlog"
	"github.com/keelrun/keel/transcript"
)

const compareDesc = `Shows two runs side by side: their status, model, steps, tool calls,
usage and duration, each run's tool calls with their results, and a diff of
their final texts (lines of A marked -, of B +). A and B are run IDs
(SESSION/run-N, as keel run prints them) or session IDs, which name the
session's last run. "keel rerun" makes the runs this is for.`

// maxDiffLines bounds the lines of each text the diff compares.
const maxDiffLines = 2000

func cmdCompare(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("compare", "keel compare [flags] A B", compareDesc)
	var conn connFlags
	conn.register(fs, false)
	pos, code, ok := fs.parse(args, stdout, stderr, 2, 2)
	if !ok {
		return code
	}
	type side struct {
		session string
		run     int // 0: the last
	}
	var sides [2]side
	for i, arg := range pos {
		sess, n, err := parseRunArg(arg)
		if err != nil {
			return fs.usageError(stderr, "%v", err)
		}
		sides[i] = side{sess, n}
	}
	kc, err := conn.dial(ctx, stderr, api.RunConfig{})
	if err != nil {
		return fail(stderr, "compare", err)
	}
	defer kc.close()
	var runs [2]*transcript.Run
	var times [2]sessionlog.Span
	for i, sd := range sides {
		view, t, err := readSession(ctx, kc.Session(sd.session))
		if err != nil {
			return fail(stderr, "compare", err)
		}
		for _, r := range view.Runs() {
			if r.Number > 0 && (sd.run == 0 && (runs[i] == nil || r.Number > runs[i].Number) || r.Number == sd.run) {
				runs[i] = r
			}
		}
		if runs[i] == nil {
			what := "no run"
			if sd.run > 0 {
				what = fmt.Sprintf("no run %d", sd.run)
			}
			return fail(stderr, "compare", keel.Errorf(keel.CodeNotFound, "session %s has %s in its log", sd.session, what))
		}
		times[i] = t[runs[i].ID]
	}
	writeComparison(stdout, runs, times)
	return exitOK
}

// parseRunArg reads SESSION or SESSION/run-N.
func parseRunArg(arg string) (session string, run int, err error) {
	session, n, hasRun := strings.Cut(arg, "/run-")
	if hasRun {
		if run, err = strconv.Atoi(n); err != nil || run < 1 {
			return "", 0, fmt.Errorf("%q: want SESSION or SESSION/run-N with N from 1", arg)
		}
	}
	if err := keel.ValidateSessionID(session); err != nil {
		return "", 0, fmt.Errorf("%q: %v", arg, err)
	}
	return session, run, nil
}

// writeComparison prints the table, the tool calls and the diff.
func writeComparison(w io.Writer, runs [2]*transcript.Run, times [2]sessionlog.Span) {
	a, b := runs[0], runs[1]
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(name string, f func(*transcript.Run, sessionlog.Span) string) {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", name, sanitizeLine(f(a, times[0])), sanitizeLine(f(b, times[1])))
	}
	row("", func(r *transcript.Run, _ sessionlog.Span) string { return r.ID })
	row("status", func(r *transcript.Run, _ sessionlog.Span) string { return string(r.Status) })
	row("model", func(r *transcript.Run, _ sessionlog.Span) string { return r.Model })
	row("steps", func(r *transcript.Run, _ sessionlog.Span) string { return strconv.Itoa(len(r.Steps)) })
	row("tool calls", func(r *transcript.Run, _ sessionlog.Span) string { return strconv.Itoa(len(r.Tools)) })
	row("tokens in/out", func(r *transcript.Run, _ sessionlog.Span) string {
		return fmt.Sprintf("%d / %d", r.Usage.InputTokens, r.Usage.OutputTokens)
	})
	row("requests", func(r *transcript.Run, _ sessionlog.Span) string { return strconv.Itoa(r.Usage.Requests) })
	row("duration", func(_ *transcript.Run, t sessionlog.Span) string {
		if t.First.IsZero() {
			return "?"
		}
		return t.Last.Sub(t.First).Round(time.Millisecond).String()
	})
	_ = tw.Flush()
	for i, r := range runs {
		label := string(rune('A' + i))
		if len(r.Tools) == 0 {
			continue
		}
		fmt.Fprintf(w, "\ntool calls of %s (%s):\n", label, sanitize(r.ID))
		for _, tc := range r.Tools {
			fmt.Fprintf(w, "  step %d  %s %s → %s: %s\n", tc.Step, sanitize(tc.Name), sanitize(oneLine(string(tc.Arguments), 80)),
				sanitize(string(tc.State)), sanitize(oneLine(tc.Output, 80)))
		}
	}
	fmt.Fprintf(w, "\nfinal text (- %s, + %s):\n", sanitize(a.ID), sanitize(b.ID))
	for _, l := range diffLines(lines(finalText(a)), lines(finalText(b))) {
		fmt.Fprintf(w, "%s\n", sanitize(l))
	}
}

// finalText is the run's answer: its result's text, else the last step's.
func finalText(r *transcript.Run) string {
	if r.Result != nil && r.Result.Text != "" {
		return r.Result.Text
	}
	if n := len(r.Steps); n > 0 {
		return r.Steps[n-1].Text
	}
	return ""
}

func lines(s string) []string {
	if s == "" {
		return nil
	}
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > maxDiffLines {
		l = append(l[:maxDiffLines:maxDiffLines], fmt.Sprintf("… %d more lines not compared", len(l)-maxDiffLines))
	}
	return l
}

// oneLine is s on one line, cut to n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// diffLines is a line diff of a and b by their longest common subsequence:
// lines of both marked "  ", of a only "- ", of b only "+ ".
func diffLines(a, b []string) []string {
	// lcs[i][j] is the length of the LCS of a[i:] and b[j:].
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []string
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] == b[j]:
			out = append(out, "  "+a[i])
			i, j = i+1, j+1
		case lcs[i+1][j] >= lcs[i][j+1]:
			out = append(out, "- "+a[i])
			i++
		default:
			out = append(out, "+ "+b[j])
			j++
		}
	}
	for ; i < len(a); i++ {
		out = append(out, "- "+a[i])
	}
	for ; j < len(b); j++ {
		out = append(out, "+ "+b[j])
	}
	return out
}
