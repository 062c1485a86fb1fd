package e2e_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
)

// TestRecordEvalHistories records, for server/workflows/replay_test.go,
// the Eval workflow (docs/contract.md §24):
//
//	KEEL_RECORD=1 go test -run TestRecordEvalHistories ./server/e2e
//
// It writes, into server/workflows/testdata:
//
//	eval.json            a dataset case with a baseline and a judge, and
//	                     the two runs of a recorded session (the
//	                     EvalRecordedCases activity, EvalRunCase for
//	                     each side), completed with its report
//	eval_cancelled.json  an eval cancelled while its first case ran:
//	                     the case's activity cancelled, then
//	                     EvalCancelCase for its runs, the rest skipped
func TestRecordEvalHistories(t *testing.T) {
	book := &keeltest.ScriptBook{}
	ok := book.Add(t, "ok", `{"repeat":true,"turns":[{"text":["42"]}]}`)
	slow := book.Add(t, "slow", `{"repeat":true,"chunk_delay":"3s","turns":[{"text":["a","b","c","d","e","f","g","h"]}]}`)
	judge := book.Add(t, "judge", `{"repeat":true,"turns":[{"text":["{\"pass\":true,\"score\":0.9,\"reasons\":\"says 42\"}"]}]}`)
	data := t.TempDir()
	r := recordStack(t, 3*time.Minute, devserver.Config{DataDir: data}, keeltest.WorkerOptions{Models: book})
	ctx, c := r.ctx, r.c
	dir := filepath.Join("..", "workflows", "testdata")

	src := c.Session("replay-eval-source")
	for _, p := range []string{"one", "two"} {
		run, err := src.Send(ctx, p, client.WithConfig(api.RunConfig{Model: ok}))
		require.NoError(t, err)
		_, err = run.Outcome(ctx)
		require.NoError(t, err)
	}
	ev, err := c.StartEval(ctx, api.EvalInput{ID: "replay-eval", Sessions: []string{src.ID()},
		Cases:     []api.EvalCase{{ID: "q", Prompt: "6*7?", Expect: api.EvalExpect{Contains: []string{"42"}, Rubric: "Says 42."}}},
		Candidate: api.RunConfig{Model: ok}, Baseline: &api.RunConfig{Model: ok}, Judge: &api.EvalJudge{Model: judge}, Concurrency: 2})
	require.NoError(t, err)
	rep, err := ev.Report(ctx)
	require.NoError(t, err)
	require.Len(t, rep.Cases, 3)
	writeHistoryOf(t, ctx, c.Temporal(), api.EvalIDPrefix+ev.ID(), "", filepath.Join(dir, "eval.json"))

	ev, err = c.StartEval(ctx, api.EvalInput{ID: "replay-eval-cancelled", Candidate: api.RunConfig{Model: slow},
		Cases: []api.EvalCase{{ID: "a", Prompt: "a"}, {ID: "b", Prompt: "b"}}, Concurrency: 1})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st, err := ev.Status(ctx)
		return err == nil && st.Running == 1
	}, time.Minute, 50*time.Millisecond)
	time.Sleep(time.Second)
	require.NoError(t, ev.Cancel(ctx))
	rep, err = ev.Report(ctx)
	require.NoError(t, err)
	require.True(t, rep.Cancelled)
	writeHistoryOf(t, ctx, c.Temporal(), api.EvalIDPrefix+ev.ID(), "", filepath.Join(dir, "eval_cancelled.json"))
	copyStore(t, filepath.Join(data, "store"), filepath.Join(dir, "store"))
}
