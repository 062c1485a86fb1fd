package eval_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/server/eval"
)

func TestBuiltinScorers(t *testing.T) {
	str := func(s string) *string { return &s }
	run := api.EvalRun{Status: keel.StatusCompleted, Answer: ` {"answer": 42} `,
		Tools:    []api.EvalToolCall{{Name: "read_file", Arguments: json.RawMessage(`{"path":"notes/todo.txt","limit":10}`), Status: "ok"}},
		Usage:    keel.Usage{InputTokens: 60, OutputTokens: 40, Cost: keel.Costs{{Currency: "USD", Nanos: 2_000_000}}},
		Duration: keel.Duration(3 * time.Second)}
	tests := []struct {
		name   string
		expect api.EvalExpect
		run    api.EvalRun
		pass   []bool // each scorer's, "completed" first
	}{
		{"nothing expected", api.EvalExpect{}, run, []bool{true}},
		{"failed run", api.EvalExpect{}, api.EvalRun{Status: keel.StatusFailed}, []bool{false}},
		{"exact", api.EvalExpect{Exact: str(`{"answer": 42}`)}, run, []bool{true, true}},
		{"exact differs", api.EvalExpect{Exact: str(`42`)}, run, []bool{true, false}},
		{"contains", api.EvalExpect{Contains: []string{"answer", "42"}}, run, []bool{true, true}},
		{"contains missing", api.EvalExpect{Contains: []string{"answer", "43"}}, run, []bool{true, false}},
		{"regex", api.EvalExpect{Regex: `"answer":\s*\d+`}, run, []bool{true, true}},
		{"regex fails", api.EvalExpect{Regex: `^\d+$`}, run, []bool{true, false}},
		{"schema", api.EvalExpect{Schema: json.RawMessage(`{"type":"object","required":["answer"]}`)}, run, []bool{true, true}},
		{"schema fails", api.EvalExpect{Schema: json.RawMessage(`{"type":"object","required":["why"]}`)}, run, []bool{true, false}},
		{"schema on text", api.EvalExpect{Schema: json.RawMessage(`{"type":"object"}`)}, api.EvalRun{Status: keel.StatusCompleted, Answer: "hi"}, []bool{true, false}},
		{"tool with args", api.EvalExpect{Tools: []api.ToolExpect{{Name: "read_file", Args: map[string]api.ArgMatch{
			"path": {Contains: "todo", Regex: `\.txt$`}, "limit": {Equals: json.RawMessage(`10`)}}}}}, run, []bool{true, true}},
		{"tool args differ", api.EvalExpect{Tools: []api.ToolExpect{{Name: "read_file", Args: map[string]api.ArgMatch{
			"limit": {Equals: json.RawMessage(`11`)}}}}}, run, []bool{true, false}},
		{"tool missing", api.EvalExpect{Tools: []api.ToolExpect{{Name: "write_file"}}}, run, []bool{true, false}},
		{"no tools", api.EvalExpect{NoTools: []string{"write_file"}}, run, []bool{true, true}},
		{"no tools at all", api.EvalExpect{NoTools: []string{"*"}}, run, []bool{true, false}},
		{"within limits", api.EvalExpect{MaxCost: 0.002, MaxTokens: 100, MaxDuration: keel.Duration(3 * time.Second)}, run, []bool{true, true}},
		{"over cost", api.EvalExpect{MaxCost: 0.001}, run, []bool{true, false}},
		{"over tokens", api.EvalExpect{MaxTokens: 99}, run, []bool{true, false}},
		{"over duration", api.EvalExpect{MaxDuration: keel.Duration(time.Second)}, run, []bool{true, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.expect.Validate(); err != nil {
				t.Fatal(err)
			}
			side := eval.ScoreRun(context.Background(), eval.Builtin(tt.expect), api.EvalCase{}, tt.run)
			var got []bool
			for _, s := range side.Scores {
				if s.Error != "" {
					t.Fatalf("%s: %s", s.Scorer, s.Error)
				}
				got = append(got, s.Pass)
			}
			if diff := cmp.Diff(tt.pass, got); diff != "" {
				t.Fatalf("passes (-want +got):\n%s\n%+v", diff, side.Scores)
			}
		})
	}
}

func TestReportOrdersRegressionsFirstAndSums(t *testing.T) {
	pass := func(score float64, ms int) api.EvalSide {
		return api.EvalSide{Pass: score == 1, Score: score, Run: &api.EvalRun{Duration: keel.Duration(time.Duration(ms) * time.Millisecond),
			Usage: keel.Usage{InputTokens: 1, Requests: 1}}}
	}
	cases := []api.EvalCaseResult{
		{Index: 0, ID: "same", Candidate: pass(1, 10), Baseline: ptr(pass(1, 20))},
		{Index: 1, ID: "better", Candidate: pass(1, 30), Baseline: ptr(pass(0.5, 40))},
		{Index: 2, ID: "worse", Candidate: pass(0.5, 50), Baseline: ptr(pass(1, 60))},
		{Index: 3, ID: "error", Candidate: api.EvalSide{Error: &keel.Error{Code: keel.CodeInvalidInput}}, Baseline: ptr(pass(1, 70))},
		{Index: 4, ID: "skipped", Candidate: api.EvalSide{Skipped: true}, Baseline: &api.EvalSide{Skipped: true}},
	}
	rep := eval.Report("r", cases, true)
	var order []string
	for _, c := range rep.Cases {
		order = append(order, c.ID+":"+c.Change)
	}
	if diff := cmp.Diff([]string{"worse:regressed", "error:regressed", "same:same", "better:improved", "skipped:"}, order); diff != "" {
		t.Fatalf("order (-want +got):\n%s", diff)
	}
	want := api.EvalTotals{Cases: 5, Passed: 2, Failed: 1, Errors: 1, Skipped: 1, PassRate: 0.5, MeanScore: 2.5 / 4,
		Histogram: [10]int{1, 0, 0, 0, 0, 1, 0, 0, 0, 2}, Usage: keel.Usage{InputTokens: 3, Requests: 3},
		DurationP50: keel.Duration(30 * time.Millisecond), DurationP99: keel.Duration(50 * time.Millisecond)}
	if diff := cmp.Diff(want, rep.Candidate); diff != "" {
		t.Fatalf("candidate (-want +got):\n%s", diff)
	}
	if rep.Regressions != 2 || rep.Improvements != 1 || !rep.BudgetSpent || rep.Baseline.Passed != 3 {
		t.Fatalf("report %+v", rep)
	}
}

func ptr[T any](v T) *T { return &v }

// The judge reads a case's conversation before its task, in order, so a
// rubric about a follow-up can be graded.
func TestJudgePromptCarriesTheConversation(t *testing.T) {
	c := api.EvalCase{ID: "name", Prompt: "What is my name?", Conversation: []api.EvalTurn{
		{Role: keel.RoleUser, Content: "My name is Ada."}, {Role: keel.RoleAssistant, Content: "Hello, Ada."}}}
	got := eval.JudgePrompt("Names the user.", c, api.EvalRun{Answer: "Ada"})
	want := "Rubric:\nNames the user.\n\n<<<CONVERSATION\nuser: My name is Ada.\nassistant: Hello, Ada.\nCONVERSATION>>>" +
		"\n\n<<<TASK\nWhat is my name?\nTASK>>>\n\n<<<ANSWER\nAda\nANSWER>>>\n"
	if got != want {
		t.Fatalf("judge prompt:\n%s\nwant:\n%s", got, want)
	}
	c.Conversation = nil
	if got := eval.JudgePrompt("r", c, api.EvalRun{}); strings.Contains(got, "CONVERSATION") {
		t.Fatalf("a case without a conversation: %s", got)
	}
}
