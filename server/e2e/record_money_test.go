package e2e_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
)

// moneyScript is a run that spends: a malformed first attempt (billed),
// then two turns that list files, each reading most of its prompt from
// the cache; a third turn the budget never lets it reach.
const moneyScript = `{"turns":[
  {"failures":[{"kind":"malformed","usage":{"input_tokens":500,"output_tokens":1000}}],
   "tool_calls":[{"id":"ls1","name":"list_files","arguments":{}}],
   "usage":{"input_tokens":1200,"cache_read_tokens":800,"cache_write_tokens":100,"output_tokens":1000}},
  {"tool_calls":[{"id":"ls2","name":"list_files","arguments":{}}],
   "usage":{"input_tokens":1200,"cache_read_tokens":800,"cache_write_tokens":100,"output_tokens":1000}},
  {"text":["never"]}
]}`

// TestRecordMoneyHistory records, for server/workflows/replay_test.go, an inline
// session's execution whose run a money budget stops (docs/contract.md
// §20): every model turn's result carries its cost by the worker's price
// table, a budget.warning, the turn the budget refused (a ModelTurn failed
// with keel.BudgetExceeded before it was sent), and the continue-as-new
// carrying the session's cost and run.failed with its usage_total.
//
//	KEEL_RECORD=1 go test -run TestRecordMoneyHistory ./server/e2e
//
// It writes server/workflows/testdata/session_money.json and the store objects it
// references.
func TestRecordMoneyHistory(t *testing.T) {
	price := keel.Price{Currency: "USD", Input: 3, Output: 15, CachedInput: 0.3, CacheWrite: 3.75, Prices: "keel.yaml"}
	r := recordStack(t, 2*time.Minute, devserver.Config{DataDir: t.TempDir()}, keeltest.WorkerOptions{
		Script: moneyScript, Tools: notesTools(t),
		Policy: activities.Policy{Prices: map[string]keel.Price{api.DefaultModel: price}, MaxTokens: 1000},
	})
	ctx, c, data := r.ctx, r.c, r.data
	sess := c.Session("replay-money")

	// Each turn costs 0.016515 USD and each check asks about 0.0152: the
	// malformed attempt and turn 1 spend 0.033015, turn 2 brings 0.04953
	// (past 80 % of 0.05: a warning), and turn 3 is refused.
	run, err := sess.Send(ctx, "Spend a little.", client.WithConfig(api.RunConfig{Tools: []string{"list_files"},
		Budget: &api.Budget{Max: 0.05, Currency: "USD"}}))
	require.NoError(t, err)
	out, err := run.Outcome(ctx)
	require.ErrorIs(t, err, keel.ErrBudgetExceeded)
	require.Equal(t, 3, out.UsageTotal.Requests)
	require.Equal(t, int64(16_500_000+2*16_515_000), out.UsageTotal.Cost.In("USD"))
	first := runExecution(t, ctx, c.Temporal(), sess.ID(), 1)

	dir := filepath.Join("..", "workflows", "testdata")
	writeHistoryOf(t, ctx, c.Temporal(), sess.ID(), first, filepath.Join(dir, "session_money.json"))
	copyStore(t, filepath.Join(data, "store"), filepath.Join(dir, "store"))
}
