package transcript_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/transcript"
)

var update = flag.Bool("update", false, "rewrite testdata/*.expect.json from the reducer's views")

// expectation is testdata/NAME.expect.json: what each event of
// NAME.jsonl did ("kind", or "kind!reason" when ignored) and the view the
// stream reduces to. The browser test of the page's reducer checks the
// same files.
type expectation struct {
	Changes []string        `json:"changes"`
	View    transcript.View `json:"view"`
}

// readStream reads a JSON-lines stream of envelopes.
func readStream(t testing.TB, path string) []keel.Envelope {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []keel.Envelope
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var env keel.Envelope
		if err := json.Unmarshal(sc.Bytes(), &env); err != nil {
			t.Fatalf("%s: %v: %s", path, err, sc.Text())
		}
		out = append(out, env)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func reduce(envs []keel.Envelope) (*transcript.Transcript, []string) {
	tr := transcript.New()
	var changes []string
	for _, env := range envs {
		ch := tr.Apply(env)
		s := string(ch.Kind)
		if ch.Ignored != "" {
			s += "!" + string(ch.Ignored)
		}
		changes = append(changes, s)
	}
	return tr, changes
}

// asJSON is v as generic JSON, for comparisons that ignore formatting.
func asJSON(t testing.TB, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// streamCases are the streams of testdata with what each must show
// beyond its expectations file: the rule the stream is there for.
var streamCases = map[string]func(t *testing.T, tr *transcript.Transcript){
	"plain": func(t *testing.T, tr *transcript.Transcript) {
		r := onlyRun(t, tr)
		want(t, "status", r.Status, transcript.Completed)
		want(t, "text", r.Step(1).Text, "Hello, world.")
		want(t, "result", r.Result.Text, "Hello, world.")
		want(t, "usage", r.Usage.InputTokens, int64(12))
	},
	"model_retry": func(t *testing.T, tr *transcript.Transcript) {
		st := onlyRun(t, tr).Step(1)
		want(t, "text of the live attempt only", st.Text, "Lost words.")
		want(t, "attempt", st.Attempt, 2)
		want(t, "abandoned", st.Abandoned, []int{1})
		want(t, "requests billed", onlyRun(t, tr).Usage.Requests, 2)
	},
	"malformed_call_retry": func(t *testing.T, tr *transcript.Transcript) {
		r := onlyRun(t, tr)
		want(t, "abandoned", r.Step(1).Abandoned, []int{1})
		want(t, "drafts replaced by the call", len(r.Step(1).Drafts), 0)
		want(t, "cards", len(r.Tools), 1)
		want(t, "card", r.Tool("g1").State, transcript.ToolState(keel.ToolOK))
	},
	"tool_retry": func(t *testing.T, tr *transcript.Transcript) {
		tc := onlyRun(t, tr).Tool("t1")
		want(t, "state", tc.State, transcript.ToolState(keel.ToolOK))
		want(t, "progress cleared", tc.Progress, "")
		want(t, "output", tc.Output, "copied 3 files")
	},
	"parallel_tools": func(t *testing.T, tr *transcript.Transcript) {
		r := onlyRun(t, tr)
		want(t, "cards", len(r.Tools), 2)
		want(t, "order", r.Tools[0].ID+","+r.Tools[1].ID, "p1,p2")
		for _, tc := range r.Tools {
			want(t, tc.ID, tc.State, transcript.ToolState(keel.ToolOK))
		}
	},
	"host_input": func(t *testing.T, tr *transcript.Transcript) {
		r := onlyRun(t, tr)
		want(t, "questions", len(r.Questions), 1)
		want(t, "answered", r.Questions[0].State, transcript.QuestionAnswered)
		want(t, "card output", r.Tool("q1").Output, "blue")
	},
	"steering": func(t *testing.T, tr *transcript.Transcript) {
		r := onlyRun(t, tr)
		want(t, "steering", len(r.Steering), 1)
		want(t, "applied", r.Steering[0].State, transcript.SteeringApplied)
		want(t, "text", r.Steering[0].Text, "be brief")
	},
	"cancelled": func(t *testing.T, tr *transcript.Transcript) {
		r := onlyRun(t, tr)
		want(t, "status", r.Status, transcript.Cancelled)
		want(t, "card", r.Tool("c1").State, transcript.ToolState(keel.ToolInterrupted))
		want(t, "partial text kept", r.Step(1).Text, "Waiting forever.")
	},
	"failed": func(t *testing.T, tr *transcript.Transcript) {
		r := onlyRun(t, tr)
		want(t, "status", r.Status, transcript.Failed)
		want(t, "code", r.Result.Code, keel.CodeProvider)
	},
	"usage_steps": func(t *testing.T, tr *transcript.Transcript) {
		r := onlyRun(t, tr)
		want(t, "requests, abandoned included", r.Usage.Requests, 3)
		want(t, "kept requests", r.Result.Usage.Requests, 2)
		want(t, "input", r.Usage.InputTokens, int64(250))
		want(t, "step 2 abandoned", r.Step(2).Abandoned, []int{1})
	},
	"hostile": func(t *testing.T, tr *transcript.Transcript) {
		v := tr.View()
		if len(v.Ignored) < 10 {
			t.Errorf("ignored %v: the stream has more than ten kinds of bad event", v.Ignored)
		}
		r := tr.Run("h/run-1")
		want(t, "text", r.Step(1).Text, "Good text.")
		want(t, "status after the events that follow the end", r.Status, transcript.Completed)
	},
	"lineage": func(t *testing.T, tr *transcript.Transcript) {
		v := tr.View()
		want(t, "runs", len(v.Runs), 2)
		if v.Forked == nil {
			t.Fatal("no forked")
		}
		want(t, "forked", *v.Forked, keel.SessionForked{Source: "src", Run: 2, Step: 1, Revision: 2, Seq: 9, Messages: 3})
		want(t, "rewinds", v.Rewinds, []keel.SessionRewound{
			{FromRun: 1, FromRevision: 3, ToRun: 0, Revision: 4, Messages: 3},
			{FromRun: 2, FromRevision: 5, ToRun: 2, ToStep: 1, Revision: 6, Messages: 5}})
		want(t, "ignored", v.Ignored, map[transcript.Reason]int{transcript.ReasonRepeat: 1, transcript.ReasonUndecodable: 1})
	},
	"rate_limit": func(t *testing.T, tr *transcript.Transcript) {
		r1, r2 := tr.Run("rl/run-1"), tr.Run("rl/run-2")
		if r1 == nil || r2 == nil {
			t.Fatalf("runs %v", tr.Runs())
		}
		for _, st := range r1.Steps {
			want(t, fmt.Sprintf("run 1 step %d waiting, after its first delta, its response or the cancel", st.Number), st.Waiting, nil)
		}
		want(t, "run 1 step 1 text", r1.Step(1).Text, "Hello.")
		want(t, "run 1 step 2 attempt", r1.Step(2).Attempt, 2)
		// "1m2.0009µs": a minute and 2,000 ns, as Go reads it.
		want(t, "run 2 waiting", r2.Step(1).Waiting, &transcript.Waiting{Limit: "anthropic", WaitMS: 60_000})
		want(t, "ignored", tr.View().Ignored, map[transcript.Reason]int{transcript.ReasonAbandoned: 1, transcript.ReasonEmpty: 1,
			transcript.ReasonInvalid: 1, transcript.ReasonOtherStep: 1, transcript.ReasonEnded: 1, transcript.ReasonUndecodable: 3, transcript.ReasonStreaming: 1})
	},
	"money": func(t *testing.T, tr *transcript.Transcript) {
		const table = "keel default list prices of 2026-03-01 (estimate)"
		r1, r2 := tr.Run("mo/run-1"), tr.Run("mo/run-2")
		if r1 == nil || r2 == nil {
			t.Fatalf("runs %v", tr.Runs())
		}
		want(t, "run 1 cost", r1.Usage.Cost, keel.Costs{{Currency: "USD", Nanos: 12_300_000, Prices: table}})
		want(t, "run 1 unpriced", r1.Usage.Unpriced, 1)
		want(t, "run 1 requests, the undecodable usage not counted", r1.Usage.Requests, 2)
		want(t, "run 1 kept cost", r1.Result.Usage.Cost, r1.Usage.Cost)
		want(t, "run 1 warnings", r1.Warnings, []keel.BudgetWarning{{Step: 1, Scope: keel.BudgetSession, Set: "worker", Limit: 1800, Spent: 1555}})
		want(t, "run 2 currencies", len(r2.Usage.Cost), 2)
		want(t, "run 2 unpriced", r2.Usage.Unpriced, 0)
		want(t, "run 2 warnings, the repeat of a limit not kept", r2.Warnings, []keel.BudgetWarning{
			{Step: 1, Scope: keel.BudgetRun, Set: "caller", Currency: "USD", Limit: 4_000_000_000, Spent: 3_300_000_000},
			{Step: 1, Scope: keel.BudgetSession, Set: "worker", Limit: 1800, Spent: 1640}})
		want(t, "run 2 status", r2.Status, transcript.Failed)
		want(t, "run 2 code", r2.Result.Code, keel.CodeBudgetExceeded)
		want(t, "ignored", tr.View().Ignored, map[transcript.Reason]int{transcript.ReasonUndecodable: 3, transcript.ReasonDuplicate: 1})
	},
	"hosted": func(t *testing.T, tr *transcript.Transcript) {
		r := onlyRun(t, tr)
		st1, st2 := r.Step(1), r.Step(2)
		names := func(st *transcript.Step) []string {
			var out []string
			for _, h := range st.Hosted {
				out = append(out, h.Name+" "+h.ID+" "+h.Query+h.Detail)
			}
			return out
		}
		want(t, "step 1 uses, the repeat of an ID and the bad ones left out", names(st1), []string{
			"web_search srvtoolu_1 keel durable agents", "web_search srvtoolu_2 keel release notes",
			"code_execution srvtoolu_3 ran 12 lines of Python", "file_search  searched 2 files"})
		want(t, "first search's URLs", st1.Hosted[0].URLs, []string{"https://example.com/keel", "https://example.org/temporal", "https://example.net/agents"})
		want(t, "a use without URLs", st1.Hosted[1].URLs, []string{})
		want(t, "a null URL decodes as Go decodes it", st1.Hosted[3].URLs, []string{"", "file://notes.md"})
		want(t, "step 2 uses: the reset dropped attempt 1's", names(st2), []string{
			"web_search ws_c keel \x1b[31mrelease\x1b[0m", "web_search  no ID", "web_search  no ID either"})
		want(t, "URLs kept", len(st2.Hosted[0].URLs), transcript.MaxURLs)
		want(t, "truncated", st2.Hosted[0].Truncated, true)
		want(t, "attempt", st2.Hosted[0].Attempt, 2)
		want(t, "web searches, the abandoned request's included", r.Usage.WebSearches, int64(6))
		want(t, "kept web searches", r.Result.Usage.WebSearches, int64(5))
		want(t, "ignored", tr.View().Ignored, map[transcript.Reason]int{transcript.ReasonDuplicate: 1, transcript.ReasonInvalid: 1,
			transcript.ReasonUndecodable: 1, transcript.ReasonAbandoned: 1, transcript.ReasonEnded: 1})
	},
	"hooks": func(t *testing.T, tr *transcript.Transcript) {
		r := onlyRun(t, tr)
		want(t, "status", r.Status, transcript.Failed)
		want(t, "stopped by a hook", r.Result.Code, keel.CodeHookStopped)
		want(t, "steps, the one boundary input at before_commit added", len(r.Steps), 3)
		want(t, "the denied call", r.Tools[0].State, transcript.ToolState(keel.ToolError))
		want(t, "the replaced call ran", r.Tools[1].State, transcript.ToolState(keel.ToolOK))
		want(t, "no steering: boundary input is not", len(r.Steering), 0)
		want(t, "ignored", tr.View().Ignored, map[transcript.Reason]int{transcript.ReasonRepeat: 1, transcript.ReasonUndecodable: 1,
			transcript.ReasonNoSeq: 1, transcript.ReasonEnded: 1})
	},
	"delegation": func(t *testing.T, tr *transcript.Transcript) {
		r := onlyRun(t, tr)
		want(t, "cards", len(r.Agents), 3)
		a1, a2, a3 := r.Agents[0], r.Agents[1], r.Agents[2]
		want(t, "first card", a1.Path+" "+a1.SessionID, "researcher-1 p--researcher-1")
		want(t, "a later attempt replaced the earlier's text; the next step follows", a1.Text, "A is réd\nDone.")
		want(t, "nested", len(a1.Nested), 1)
		want(t, "nested text", a1.Nested[0].Path+": "+a1.Nested[0].Text, "researcher-1/coder-1: deeper")
		want(t, "failed", a1.Status, keel.StatusFailed)
		want(t, "second", a2.Text, "B is blue")
		want(t, "second usage", a2.Usage.Requests, 1)
		want(t, "a child never started links to no session", a3.Path+" "+a3.SessionID+" "+string(a3.Status), "researcher-3  failed")
		want(t, "the parent's own text is the parent's", r.Step(2).Text, "B is blue.")
		want(t, "ignored", tr.View().Ignored, map[transcript.Reason]int{transcript.ReasonAbandoned: 1,
			transcript.ReasonEmpty: 1, transcript.ReasonUnknownRun: 1, transcript.ReasonEnded: 1, transcript.ReasonDuplicate: 1})
	},
}

func onlyRun(t *testing.T, tr *transcript.Transcript) *transcript.Run {
	t.Helper()
	if len(tr.Runs()) != 1 {
		t.Fatalf("%d runs, want 1", len(tr.Runs()))
	}
	return tr.Runs()[0]
}

func want[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: got %v, want %v", what, got, want)
	}
}

// TestRecordedStreams reduces every stream of testdata and compares what
// each event did and the view with the stream's expectations.
func TestRecordedStreams(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "*.jsonl"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no streams in testdata: %v", err)
	}
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), ".jsonl")
		t.Run(name, func(t *testing.T) {
			tr, changes := reduce(readStream(t, path))
			got := expectation{Changes: changes, View: tr.View()}
			expPath := strings.TrimSuffix(path, ".jsonl") + ".expect.json"
			if *update {
				b, err := json.MarshalIndent(got, "", "  ")
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(expPath, append(b, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			raw, err := os.ReadFile(expPath)
			if err != nil {
				t.Fatalf("%v (run with -update to write it)", err)
			}
			var exp any
			if err := json.Unmarshal(raw, &exp); err != nil {
				t.Fatal(err)
			}
			if g := asJSON(t, got); !reflect.DeepEqual(exp, g) {
				b, _ := json.MarshalIndent(g, "", "  ")
				t.Errorf("%s differs from what the reducer made:\n%s", expPath, b)
			}
			check := streamCases[name]
			if check == nil {
				t.Fatalf("no case checks %s", name)
			}
			check(t, tr)
		})
	}
}
