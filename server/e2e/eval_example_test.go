package e2e_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
)

// The worked example of docs/evals.md, from its files in
// server/examples/eval: the numbers the page shows are these.
func TestEvalExampleOfTheDocs(t *testing.T) {
	dir := filepath.Join("..", "examples", "eval")
	book := &keeltest.ScriptBook{}
	for _, name := range []string{"eval-candidate", "eval-baseline"} {
		script, err := os.ReadFile(filepath.Join(dir, "scripts", name+".json"))
		require.NoError(t, err)
		require.Equal(t, "scripted:"+name, book.Add(t, name, string(script)))
	}
	f, err := os.Open(filepath.Join(dir, "dataset.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	cases, err := api.ReadDataset(f)
	require.NoError(t, err)

	ctx := testContext(t, 2*time.Minute)
	srv := keeltest.StartServer(t, devserver.Config{})
	keeltest.StartWorker(t, srv, keeltest.WorkerOptions{Models: book})
	c := keeltest.Client(t, srv, nil)
	cand := api.RunConfig{Model: "scripted:eval-candidate", Tools: []string{"list_files"}}
	base := api.RunConfig{Model: "scripted:eval-baseline", Tools: []string{"list_files"}}
	ev, err := c.StartEval(ctx, api.EvalInput{ID: "example", Cases: cases, Candidate: cand, Baseline: &base})
	require.NoError(t, err)
	rep, err := ev.Report(ctx)
	require.NoError(t, err)

	var order []string
	for _, c := range rep.Cases {
		order = append(order, c.ID+" "+c.Change)
	}
	require.Equal(t, []string{"no-lookups regressed", "capital improved", "looks-first improved", "one-sentence same"}, order)
	require.Equal(t, 3, rep.Candidate.Passed)
	require.Equal(t, 2, rep.Baseline.Passed)
	require.InDelta(t, 0.75, rep.Candidate.PassRate, 1e-9)
	require.Equal(t, int64(4*100), rep.Candidate.Usage.InputTokens)
	require.Equal(t, int64(4*40), rep.Baseline.Usage.InputTokens)
}
