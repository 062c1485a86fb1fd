package e2e_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
)

// A recorded run sent with an attachment is a case whose prompt goes
// with the same attachment: the candidate's session gets the prompt as
// the original run got it.
func TestEvalRecordedRunKeepsItsAttachments(t *testing.T) {
	book := &keeltest.ScriptBook{}
	model := book.Add(t, "looks", `{"repeat":true,"turns":[{"text":["A cat."]}]}`)
	ctx := testContext(t, 2*time.Minute)
	srv := keeltest.StartServer(t, devserver.Config{})
	keeltest.StartWorker(t, srv, keeltest.WorkerOptions{Models: book})
	c := keeltest.Client(t, srv, nil)

	att, err := c.Attach(ctx, "cat.png", "image/png", photo(t, 8, 8))
	require.NoError(t, err)
	src := c.Session("pictured")
	for _, opts := range [][]client.SendOption{{client.WithAttachments(att)}, nil} {
		run, err := src.Send(ctx, "What is in the picture?", append(opts, client.WithConfig(api.RunConfig{Model: model}))...)
		require.NoError(t, err)
		_, err = run.Outcome(ctx)
		require.NoError(t, err)
	}
	ev, err := c.StartEval(ctx, api.EvalInput{ID: "pictures", Sessions: []string{"pictured"},
		Candidate: api.RunConfig{Model: model}})
	require.NoError(t, err)
	rep, err := ev.Report(ctx)
	require.NoError(t, err)
	require.Len(t, rep.Cases, 2)
	for i, want := range [][]keel.Attachment{{att}, nil} {
		h, err := c.Session(api.EvalCaseSessionID("pictures", i, "c")).History(ctx, 0, 100)
		require.NoError(t, err)
		require.NotEmpty(t, h.Messages)
		var prompt keel.Message
		for _, m := range h.Messages {
			if m.Role == keel.RoleUser {
				prompt = m
			}
		}
		require.Equal(t, "What is in the picture?", prompt.Content)
		require.Equal(t, want, prompt.Attachments, "case %d", i)
	}
}

// An eval over recorded sessions (docs/contract.md §24): each committed
// run is a case, forked at the point before it, run by the candidate's
// model, with the original run as its baseline. The original model
// answered run 1 and failed run 2; the candidate fails what run 1 saw
// and answers what run 2 saw: one case regresses, one improves, and the
// report's numbers say so. The session is named by a prefix.
func TestEvalRecordedSessionsImproveAndRegress(t *testing.T) {
	book := &keeltest.ScriptBook{}
	orig := book.Add(t, "orig", `{"turns":[
	  {"text":["Paris"],"usage":{"input_tokens":10,"output_tokens":5}},
	  {"failures":[{"kind":"auth","status":401}],"text":["x"]}]}`)
	cand := book.Add(t, "cand", `{"turns":[
	  {"failures":[{"kind":"auth","status":401}],"text":["x"]},
	  {"text":["Berlin"],"usage":{"input_tokens":20,"output_tokens":7}}]}`)
	ctx := testContext(t, 2*time.Minute)
	srv := keeltest.StartServer(t, devserver.Config{})
	keeltest.StartWorker(t, srv, keeltest.WorkerOptions{Models: book})
	c := keeltest.Client(t, srv, nil)

	src := c.Session("recorded")
	for _, prompt := range []string{"Capital of France?", "Capital of Germany?"} {
		run, err := src.Send(ctx, prompt, client.WithConfig(api.RunConfig{Model: orig}))
		require.NoError(t, err)
		_, _ = run.Outcome(ctx)
	}

	ev, err := c.StartEval(ctx, api.EvalInput{ID: "rec", SessionPrefix: "record",
		Candidate: api.RunConfig{Model: cand}, Concurrency: 2})
	require.NoError(t, err)
	rep, err := ev.Report(ctx)
	require.NoError(t, err)

	require.Len(t, rep.Cases, 2)
	require.Equal(t, 1, rep.Regressions)
	require.Equal(t, 1, rep.Improvements)
	first, second := rep.Cases[0], rep.Cases[1]
	require.Equal(t, "recorded/run-1", first.ID, "regressions first")
	require.Equal(t, api.EvalRegressed, first.Change)
	require.Equal(t, &api.EvalSource{Session: "recorded", Run: 1}, first.From)
	require.Equal(t, "Paris", first.Baseline.Run.Answer)
	require.Equal(t, keel.StatusFailed, first.Candidate.Run.Status)
	require.Equal(t, "recorded/run-2", second.ID)
	require.Equal(t, api.EvalImproved, second.Change)
	require.Equal(t, "Berlin", second.Candidate.Run.Answer)
	require.Equal(t, keel.StatusFailed, second.Baseline.Run.Status)
	require.Equal(t, api.EvalCaseSessionID("rec", 1, "c"), second.Candidate.Run.Session)

	require.NotNil(t, rep.Baseline)
	for _, tot := range []api.EvalTotals{rep.Candidate, *rep.Baseline} {
		require.Equal(t, 2, tot.Cases)
		require.Equal(t, 1, tot.Passed)
		require.Equal(t, 1, tot.Failed)
		require.InDelta(t, 0.5, tot.PassRate, 1e-9)
		require.InDelta(t, 0.5, tot.MeanScore, 1e-9)
		require.Equal(t, [10]int{1, 0, 0, 0, 0, 0, 0, 0, 0, 1}, tot.Histogram)
		require.Positive(t, tot.DurationP99)
		require.GreaterOrEqual(t, tot.DurationP99, tot.DurationP50)
	}
	require.Equal(t, int64(20), rep.Candidate.Usage.InputTokens)
	require.Equal(t, int64(7), rep.Candidate.Usage.OutputTokens)
	require.Equal(t, int64(10), rep.Baseline.Usage.InputTokens)

	st, err := ev.Status(ctx)
	require.NoError(t, err)
	require.Equal(t, api.EvalStatus{ID: "rec", State: api.EvalCompleted, Total: 2, Done: 2, Passed: 1, Failed: 1,
		Usage: rep.Candidate.Usage}, st)

	// The recorded session is untouched, and an ID that ran is not run
	// again.
	view, err := src.State(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, view.Runs)
	_, err = c.StartEval(ctx, api.EvalInput{ID: "rec", Sessions: []string{"recorded"}, Candidate: api.RunConfig{Model: cand}})
	require.ErrorIs(t, err, keel.ErrInvalidInput)
	require.True(t, strings.Contains(err.Error(), "already ran"), err.Error())
}
