package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
)

// The report's table: both sides' totals, the cases regressions first,
// and the detail of a regression with its scorers' reasons, tool calls
// and the diff of the answers; bytes a model wrote never reach the
// terminal as control sequences.
func TestWriteEvalReport(t *testing.T) {
	run := func(answer string, tools ...api.EvalToolCall) *api.EvalRun {
		return &api.EvalRun{Status: keel.StatusCompleted, Answer: answer, Tools: tools,
			Usage: keel.Usage{InputTokens: 100, OutputTokens: 20, Requests: 2}, Duration: keel.Duration(300 * time.Millisecond)}
	}
	rep := api.EvalReport{ID: "first-eval", Regressions: 1, Improvements: 1,
		Cases: []api.EvalCaseResult{
			{ID: "no-lookups", Prompt: "Without looking anything up?", Change: api.EvalRegressed,
				Candidate: api.EvalSide{Score: 0.5, Run: run("Paris.\x1b[2J", api.EvalToolCall{Name: "list_files", Arguments: []byte(`{"path":"."}`), Status: "ok"}),
					Scores: []api.EvalScore{{Scorer: "completed", Pass: true, Score: 1}, {Scorer: "no_tools", Reason: "called list_files"}}},
				Baseline: &api.EvalSide{Pass: true, Score: 1, Run: run("Lyon.")}},
			{ID: "capital", Change: api.EvalImproved, Candidate: api.EvalSide{Pass: true, Score: 1, Run: run("Paris.")},
				Baseline: &api.EvalSide{Score: 0.5, Run: run("Lyon.")}},
		},
		Candidate: api.EvalTotals{Cases: 2, Passed: 1, Failed: 1, PassRate: 0.5, MeanScore: 0.75, Histogram: [10]int{5: 1, 9: 1},
			Usage: keel.Usage{InputTokens: 200, OutputTokens: 40, Requests: 4}},
		Baseline: &api.EvalTotals{Cases: 2, Passed: 1, Failed: 1, PassRate: 0.5, MeanScore: 0.75}}
	var b bytes.Buffer
	writeEvalReport(&b, rep)
	out := b.String()
	for _, want := range []string{"pass rate", "50.0% (1/2)", "1 regressed · 1 improved", "no-lookups  regressed  fail 0.50  pass 1.00",
		"candidate no_tools: called list_files", `candidate tool list_files {"path":"."} → ok`, "- Lyon.", "+ Paris."} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("a control byte reached the output:\n%q", out)
	}
	if strings.Index(out, "no-lookups") > strings.Index(out, "capital") {
		t.Errorf("the regression is not first:\n%s", out)
	}
}
