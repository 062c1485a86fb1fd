package e2e_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/eval"
	"github.com/keelrun/keel/server/internal/keeltest"
)

// An eval over a dataset (docs/contract.md §24): each case runs under
// the candidate's model and the baseline's, scored by the deterministic
// scorers its expectations name and by a judge. The candidate calls a
// tool and answers 42; the baseline answers without it. The judge is
// overloaded once, then answers no verdict that matches its schema: its
// turn is retried within the contract's budget (a 1 s wait, then
// malformed responses), then the judge scorer's error fails the case;
// it is never a pass.
func TestEvalDatasetScorersAndMalformedJudge(t *testing.T) {
	book := &keeltest.ScriptBook{}
	good := book.Add(t, "good", `{"repeat":true,"turns":[
	  {"tool_calls":[{"id":"l1","name":"list_files","arguments":{"path":"."}}],"usage":{"input_tokens":3,"output_tokens":2}},
	  {"text":["The answer is 42"],"usage":{"input_tokens":5,"output_tokens":4}}]}`)
	plain := book.Add(t, "plain", `{"repeat":true,"turns":[{"text":["I do not know"],"usage":{"input_tokens":1,"output_tokens":1}}]}`)
	judge := book.Add(t, "judge", `{"repeat":true,"turns":[{"failures":[
	  {"kind":"overloaded","status":503},{"kind":"text","text":["looks fine to me"]},{"kind":"text","text":["{\"pass\": \"yes\"}"]}],
	  "text":["PASS"]}]}`)
	ctx := testContext(t, 2*time.Minute)
	srv := keeltest.StartServer(t, devserver.Config{})
	keeltest.StartWorker(t, srv, keeltest.WorkerOptions{Models: book})
	c := keeltest.Client(t, srv, nil)

	dataset := `{"id":"answer","prompt":"What is 6*7?","expect":{"contains":["42"],"regex":"answer is \\d+","tools":[{"name":"list_files","args":{"path":{"equals":"."}}}]}}

{"id":"quiet","prompt":"Just answer.","expect":{"no_tools":["list_files"],"max_tokens":100}}
{"id":"judged","prompt":"Grade me.","expect":{"rubric":"Says 42."}}
`
	cases, err := api.ReadDataset(strings.NewReader(dataset))
	require.NoError(t, err)
	require.Len(t, cases, 3)
	cfg := api.RunConfig{Model: good, Tools: []string{"list_files"}}
	base := api.RunConfig{Model: plain, Tools: []string{"list_files"}}
	ev, err := c.StartEval(ctx, api.EvalInput{ID: "data", Cases: cases, Candidate: cfg, Baseline: &base,
		Judge: &api.EvalJudge{Model: judge}, Concurrency: 3})
	require.NoError(t, err)
	rep, err := ev.Report(ctx)
	require.NoError(t, err)

	byID := map[string]api.EvalCaseResult{}
	for _, c := range rep.Cases {
		byID[c.ID] = c
	}
	require.Equal(t, "quiet", rep.Cases[0].ID, "regressions first")
	require.Equal(t, api.EvalRegressed, byID["quiet"].Change)
	require.Equal(t, []string{"called list_files"}, failedReasons(byID["quiet"].Candidate))
	require.True(t, byID["quiet"].Baseline.Pass)

	answer := byID["answer"]
	require.Equal(t, api.EvalImproved, answer.Change)
	require.True(t, answer.Candidate.Pass, "%+v", answer.Candidate.Scores)
	require.Equal(t, []string{"completed", "contains", "regex", "tools"}, scorerNames(answer.Candidate))
	require.Equal(t, []api.EvalToolCall{{Name: "list_files", Arguments: []byte(`{"path":"."}`), Status: "ok"}}, answer.Candidate.Run.Tools)
	require.False(t, answer.Baseline.Pass)
	require.InDelta(t, 0.25, answer.Baseline.Score, 1e-9) // completed, of four scorers

	judged := byID["judged"]
	for _, side := range []api.EvalSide{judged.Candidate, *judged.Baseline} {
		require.False(t, side.Pass)
		last := side.Scores[len(side.Scores)-1]
		require.Equal(t, "judge", last.Scorer)
		require.False(t, last.Pass)
		require.Contains(t, last.Error, "judge gave no verdict")
		require.Contains(t, last.Error, "malformed")
		require.NotNil(t, last.Usage)
		require.Equal(t, 4, last.Usage.Requests, "an overloaded request, then three malformed verdicts")
	}
	// The judge's run waited 1 s after the overloaded request, retried
	// the malformed verdicts at once, and failed at the third
	// (docs/contract.md §4.2, §4.3).
	jrun, err := c.Session(api.EvalCaseSessionID("data", 2, "cj")).Run(1).Outcome(ctx)
	require.ErrorIs(t, err, keel.ErrMalformedResponse)
	require.Equal(t, 4, jrun.UsageTotal.Requests)
	require.Equal(t, api.EvalSame, judged.Change)

	require.Equal(t, withoutScoreNoise(api.EvalTotals{Cases: 3, Passed: 1, Failed: 1, Errors: 1, PassRate: 1.0 / 3,
		// "answer" scores 1, "quiet" 2 of 3, "judged" 1 of 2.
		MeanScore: (1 + 2.0/3 + 0.5) / 3, Histogram: [10]int{0, 0, 0, 0, 0, 1, 1, 0, 0, 1},
		Usage:       keel.Usage{InputTokens: 3 * 8, OutputTokens: 3 * 6, Requests: 6},
		JudgeUsage:  keel.Usage{Requests: 4},
		DurationP50: rep.Candidate.DurationP50, DurationP99: rep.Candidate.DurationP99}), withoutScoreNoise(rep.Candidate))
	require.Equal(t, 1, rep.Regressions)
	require.Equal(t, 1, rep.Improvements)
}

func scorerNames(s api.EvalSide) []string {
	var names []string
	for _, sc := range s.Scores {
		names = append(names, sc.Scorer)
	}
	return names
}

func failedReasons(s api.EvalSide) []string {
	var why []string
	for _, sc := range s.Scores {
		if !sc.Pass {
			why = append(why, sc.Reason)
		}
	}
	return why
}

// withoutScoreNoise rounds the mean score, a sum of thirds.
func withoutScoreNoise(t api.EvalTotals) api.EvalTotals {
	t.MeanScore = float64(int(t.MeanScore*1e6+0.5)) / 1e6
	t.PassRate = float64(int(t.PassRate*1e6+0.5)) / 1e6
	return t
}

// politeScorer is a worker's own scorer (docs/evals.md).
type politeScorer struct{}

func (politeScorer) Name() string { return "polite" }

func (politeScorer) Score(_ context.Context, _ api.EvalCase, run api.EvalRun) (api.EvalScore, error) {
	return eval.Verdict("polite", strings.Contains(run.Answer, "please"), "says please"), nil
}

// A worker's own scorers score every case after the deterministic ones.
func TestEvalRunsTheWorkersOwnScorers(t *testing.T) {
	book := &keeltest.ScriptBook{}
	m := book.Add(t, "curt", `{"repeat":true,"turns":[{"text":["No."]}]}`)
	ctx := testContext(t, time.Minute)
	srv := keeltest.StartServer(t, devserver.Config{})
	keeltest.StartWorker(t, srv, keeltest.WorkerOptions{Models: book, Scorers: []eval.Scorer{politeScorer{}}})
	c := keeltest.Client(t, srv, nil)
	ev, err := c.StartEval(ctx, api.EvalInput{ID: "own", Candidate: api.RunConfig{Model: m},
		Cases: []api.EvalCase{{ID: "a", Prompt: "May I?", Expect: api.EvalExpect{Contains: []string{"No"}}}}})
	require.NoError(t, err)
	rep, err := ev.Report(ctx)
	require.NoError(t, err)
	side := rep.Cases[0].Candidate
	require.Equal(t, []string{"completed", "contains", "polite"}, scorerNames(side))
	require.False(t, side.Pass)
	require.Equal(t, []string{"says please"}, failedReasons(side))
}

// A dataset case's conversation (docs/contract.md §24.1) is the
// transcript its sessions start with, on both sides. A scripted model
// plays the turn numbered by the assistant messages its request
// carries (docs/scripted.md), so each model answers its second turn
// only when its request carried the conversation's assistant turn: the
// candidate names the user, the baseline guesses. The session's history
// begins with the conversation, its log with its run (no fork claims a
// source), and a fork of it at run 0 starts from the conversation.
func TestEvalCaseStartsWithItsConversation(t *testing.T) {
	book := &keeltest.ScriptBook{}
	cand := book.Add(t, "remembers", `{"turns":[{"text":["I do not know your name."]},{"text":["Your name is Ada."]}]}`)
	base := book.Add(t, "guesses", `{"turns":[{"text":["Who are you?"]},{"text":["Maybe Bob?"]}]}`)
	ctx := testContext(t, time.Minute)
	srv := keeltest.StartServer(t, devserver.Config{})
	keeltest.StartWorker(t, srv, keeltest.WorkerOptions{Models: book})
	c := keeltest.Client(t, srv, nil)

	cases, err := api.ReadDataset(strings.NewReader(
		`{"id":"name","conversation":[{"role":"user","content":"My name is Ada."},{"role":"assistant","content":"Hello, Ada."}],"prompt":"What is my name?","expect":{"contains":["Ada"]}}`))
	require.NoError(t, err)
	ev, err := c.StartEval(ctx, api.EvalInput{ID: "conv", Cases: cases, Candidate: api.RunConfig{Model: cand},
		Baseline: &api.RunConfig{Model: base}})
	require.NoError(t, err)
	rep, err := ev.Report(ctx)
	require.NoError(t, err)
	got := rep.Cases[0]
	require.True(t, got.Candidate.Pass, "%+v", got.Candidate)
	require.Equal(t, "Your name is Ada.", got.Candidate.Run.Answer)
	require.False(t, got.Baseline.Pass)
	require.Equal(t, "Maybe Bob?", got.Baseline.Run.Answer)
	require.Equal(t, api.EvalImproved, got.Change)

	conv := []keel.Message{{Role: keel.RoleUser, Content: "My name is Ada."}, {Role: keel.RoleAssistant, Content: "Hello, Ada."}}
	for side, answer := range map[string]string{"c": "Your name is Ada.", "b": "Maybe Bob?"} {
		sess := c.Session(api.EvalCaseSessionID("conv", 0, side))
		h, err := sess.History(ctx, 0, 10)
		require.NoError(t, err)
		require.Equal(t, append(conv, keel.Message{Role: keel.RoleUser, Content: "What is my name?"},
			keel.Message{Role: keel.RoleAssistant, Content: answer}), textOnly(h.Messages), side)
		evs, err := sess.EventsAfter(ctx, 0)
		require.NoError(t, err)
		require.Equal(t, keel.TypeRunStarted, evs[0].Type, side)
	}
	fork, _, err := c.Session(api.EvalCaseSessionID("conv", 0, "c")).Fork(ctx, api.Point{Run: 0}, "conv-fork")
	require.NoError(t, err)
	h, err := fork.History(ctx, 0, 10)
	require.NoError(t, err)
	require.Equal(t, conv, textOnly(h.Messages))

	// A case whose session exists already, with a history of its own,
	// is never scored on it: the side is an error.
	taken, err := c.Session(api.EvalCaseSessionID("conv2", 0, "c")).Send(ctx, "Hi.", client.WithConfig(api.RunConfig{Model: base}))
	require.NoError(t, err)
	_, err = taken.Outcome(ctx)
	require.NoError(t, err)
	ev, err = c.StartEval(ctx, api.EvalInput{ID: "conv2", Cases: cases, Candidate: api.RunConfig{Model: cand}})
	require.NoError(t, err)
	rep, err = ev.Report(ctx)
	require.NoError(t, err)
	side := rep.Cases[0].Candidate
	require.NotNil(t, side.Error, "%+v", side)
	require.Equal(t, keel.CodeInvalidInput, side.Error.Code)
	require.Contains(t, side.Error.Message, "did not start with the case's conversation")
}

// textOnly keeps each message's role and text.
func textOnly(msgs []keel.Message) []keel.Message {
	out := make([]keel.Message, len(msgs))
	for i, m := range msgs {
		out[i] = keel.Message{Role: m.Role, Content: m.Content}
	}
	return out
}
