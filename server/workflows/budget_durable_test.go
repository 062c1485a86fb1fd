package workflows_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/carry"
)

// flatPrice prices only answer tokens, a thousandth of a unit each, so a
// request's estimate is exactly its max_tokens at that price: with
// max_tokens 1,000 every check asks for 1.00 USD, and a turn reporting
// 1,000 answer tokens costs 1.00 USD. The arithmetic of the budget tests
// below is then exact.
var flatPrice = keel.Price{Currency: "USD", Output: 1000, Prices: "flat test table"}

// dollarTurn calls echo and reports 1,000 answer tokens: 1.00 USD at
// flatPrice.
const dollarTurn = `{"tool_calls":[{"id":"c","name":"echo","arguments":{"text":"x"}}],` +
	`"usage":{"input_tokens":1000,"output_tokens":1000}}`

// budgetRunConfig is a run that echoes until a budget stops it.
func budgetRunConfig(run, session *api.Budget) *api.RunConfig {
	return &api.RunConfig{Model: "scripted:test", Tools: []string{"echo"}, MaxTokens: 1000,
		Budget: run, SessionBudget: session}
}

// docs/contract.md §20.3 and §15: budgets hold across continue-as-new.
// Every execution of this session is told by Temporal to continue as new
// from its first task; a run is never cut for it (an execution always
// commits its run first, §15.1), so the run budget binds within the run
// at exactly the request that would pass it, and the session budget,
// counted from what each execution hands the next, binds across five
// executions at exactly the request that would pass it.
//
// Each request costs 1.00 USD and each check asks for 1.00 USD. Run
// budget 2.00: a run makes two requests (1+1 ≤ 2; 2+1 > 2). Session budget
// 7.50: runs 1-3 make two each (6.00 spent), run 4 one (7.00; 7+1 >
// 7.50), run 5 none.
func TestBudgetsHoldAcrossHandOvers(t *testing.T) {
	script := `{"repeat":true,"turns":[` + dollarTurn + `]}`
	runBudget := &api.Budget{Max: 2, Currency: "USD"}
	sessionBudget := &api.Budget{Max: 7.5, Currency: "USD"}
	wantRequests := []int{2, 2, 2, 1, 0}
	wantScope := []string{"run", "run", "run", "session", "session"}
	wantLeft := []string{"0.00 USD left of 2.00", "0.00 USD left of 2.00", "0.00 USD left of 2.00",
		"0.50 USD left of 7.50", "0.50 USD left of 7.50"}

	var carry *carry.SessionCarry
	var spent int64
	for i := range wantRequests {
		var suite testsuite.WorkflowTestSuite
		e := newEnvOf(t, &suite, scriptedProvider(t, script))
		e.acts.Policy.Prices = map[string]keel.Price{"scripted:test": flatPrice}
		// Temporal suggests a hand-over all along: the run goes on to its
		// end in this execution regardless.
		e.SetContinueAsNewSuggested(true)
		res := e.execSession(t, sessionSend{Prompt: fmt.Sprintf("prompt %d", i+1),
			Config: *budgetRunConfig(runBudget, sessionBudget), Carry: carry})
		c := res.Carry
		carry = c
		require.Equal(t, i+1, c.HandOvers)

		// This run's events: its usage facts, one per request, each 1.00
		// USD, their running total within the run, and one terminal event.
		run := res.Events
		ups := find[keel.UsageUpdated](t, run)
		require.Len(t, ups, wantRequests[i], "run %d's requests", i+1)
		for n, u := range ups {
			require.Equal(t, int64(1e9), u.Usage.Cost.In("USD"), "run %d request %d", i+1, n+1)
			require.Equal(t, int64(n+1)*1e9, u.Total.Cost.In("USD"), "run %d's running total", i+1)
		}
		spent += int64(wantRequests[i]) * 1e9
		require.Equal(t, spent, c.Usage.Cost.In("USD"), "what execution %d handed on", i+1)

		failed := find[keel.RunFailed](t, run)
		require.Len(t, failed, 1)
		require.Equal(t, keel.CodeBudgetExceeded, failed[0].Code)
		require.Contains(t, failed[0].Message, "the "+wantScope[i]+" budget (set by the caller) has "+wantLeft[i]+" USD")
		require.Equal(t, keel.CodeBudgetExceeded, failure(t, *c.Last).Code)
		require.Equal(t, int64(wantRequests[i])*1e9, c.Last.UsageTotal.Cost.In("USD"))
	}
	require.Equal(t, int64(7e9), spent)
}

// docs/contract.md §4 and §20.3: abandoned attempts are billed and count
// toward the budget like kept ones. A turn's first attempt is cut
// mid-stream after its usage came, its second is malformed; each cost
// 1.00 USD. With a run budget of 2.50, the third attempt (2 + 1 > 2.50)
// is not sent: the run fails keel.BudgetExceeded having kept nothing.
func TestAbandonedAttemptsCountTowardTheBudget(t *testing.T) {
	env := newRunEnv(t, `{"turns":[{`+
		`"failures":[{"kind":"stream_cut","after_chunks":3,"usage":{"input_tokens":10,"output_tokens":1000}},`+
		`{"kind":"malformed","usage":{"input_tokens":10,"output_tokens":1000}}],`+
		`"tool_calls":[{"id":"c","name":"echo","arguments":{"text":"x"}}],"usage":{"output_tokens":1}},`+
		`{"text":["never"]}]}`)
	env.acts.Policy.Prices = map[string]keel.Price{"scripted:test": flatPrice}
	in := promptOf("hi", "echo")
	in.Config.MaxTokens = 1000
	in.Config.Budget = &api.Budget{Max: 2.5, Currency: "USD"}
	res := env.execSession(t, in)

	ups := find[keel.UsageUpdated](t, res.Events)
	require.Len(t, ups, 2, "two abandoned attempts, no third")
	require.Equal(t, []int{1, 2}, []int{ups[0].Attempt, ups[1].Attempt})
	require.Equal(t, int64(2e9), ups[1].Total.Cost.In("USD"))
	require.Len(t, find[keel.ProviderStreamReset](t, res.Events), 2)
	require.Equal(t, keel.CodeBudgetExceeded, failure(t, res.Outcome).Code)
	require.Contains(t, failure(t, res.Outcome).Message, "has 0.50 USD left of 2.50 USD")
	require.Equal(t, int64(2e9), res.Outcome.UsageTotal.Cost.In("USD"))
	require.Empty(t, res.Outcome.Usage.Cost, "nothing was kept")
}

// docs/contract.md §9 and §20.3: a compaction's request is priced and
// counts toward the next check, though it is not refused itself. The
// compaction before step 1 costs what the scripted summarizer reports (its
// answer is 10 tokens: 0.01 USD at flatPrice); with a run budget of 1.005,
// the step's request (1.00 asked) no longer fits, though alone it would.
func TestCompactionCountsTowardTheNextCheck(t *testing.T) {
	for _, c := range []struct {
		budget float64
		fits   bool
	}{{1.005, false}, {1.01, true}} {
		t.Run(fmt.Sprint(c.budget), func(t *testing.T) {
			env := newRunEnv(t, `{"turns":[`+strings.Repeat(`{"text":["old"]},`, 10)+`{"text":["after compaction"]}]}`)
			env.acts.Policy.Prices = map[string]keel.Price{"scripted:test": flatPrice}
			in := promptOf("next question")
			in.Carry = &carry.SessionCarry{Transcript: longTranscript(10)}
			in.Config.CompactAt = 200
			in.Config.MaxTokens = 1000
			in.Config.Budget = &api.Budget{Max: c.budget, Currency: "USD"}
			res := env.execSession(t, in)

			ups := find[keel.UsageUpdated](t, res.Events)
			require.NotEmpty(t, ups)
			require.Equal(t, 0, ups[0].Attempt, "the compaction's request")
			require.Equal(t, int64(10_000_000), ups[0].Usage.Cost.In("USD"), "10 answer tokens")
			require.Len(t, find[keel.CompactionCompleted](t, res.Events), 1)
			if c.fits {
				require.Equal(t, keel.StatusCompleted, res.Outcome.Status)
				require.Len(t, ups, 2)
				return
			}
			require.Len(t, ups, 1, "the step's request was not sent")
			require.Equal(t, keel.CodeBudgetExceeded, failure(t, res.Outcome).Code)
			require.Contains(t, failure(t, res.Outcome).Message, "has 0.995 USD left of 1.005 USD")
		})
	}
}
