package workflows_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/carry"
	"github.com/keelrun/keel/server/workflows"
)

// testPrice makes 1,000 prompt tokens and 1,000 answer tokens cost one
// USD each: a scripted turn's usage reads as dollars.
var testPrice = keel.Price{Currency: "USD", Input: 1000, Output: 1000, CachedInput: 100, Prices: "test table"}

// echoTurn is a turn that calls echo and reports usage.
func echoTurn(id, usage string) string {
	return `{"tool_calls":[{"id":"` + id + `","name":"echo","arguments":{"text":"x"}}],"usage":` + usage + `}`
}

// docs/contract.md §20: every usage.updated carries its request's cost,
// failed attempts included, and its running total; run.completed and the
// outcome carry the totals; a cost the provider claims is replaced by the
// worker's price.
func TestCostOnEveryUsageFact(t *testing.T) {
	script := `{"turns":[` +
		`{"failures":[{"kind":"malformed","usage":{"input_tokens":500,"output_tokens":10}}],` +
		`"tool_calls":[{"id":"c1","name":"echo","arguments":{"text":"x"}}],` +
		`"usage":{"input_tokens":1000,"cache_read_tokens":400,"output_tokens":100,"cost":[{"currency":"USD","nanos":1}]}},` +
		`{"text":["done"],"usage":{"input_tokens":1200,"output_tokens":50}}]}`
	env := newRunEnv(t, script)
	env.acts.Policy.Prices = map[string]keel.Price{"scripted:test": testPrice}
	res := env.execSession(t, promptOf("hi", "echo"))

	ups := find[keel.UsageUpdated](t, res.Events)
	require.Len(t, ups, 3, "one usage.updated per physical request, the failed one included")
	want := []int64{
		510_000_000,                            // 500 + 10 tokens
		600_000_000 + 40_000_000 + 100_000_000, // 600 plain + 400 cached at a tenth + 100 out
		1_250_000_000,
	}
	var total int64
	for i, u := range ups {
		require.Equal(t, keel.Costs{{Currency: "USD", Nanos: want[i], Prices: "test table"}}, u.Usage.Cost, "request %d", i+1)
		total += want[i]
		require.Equal(t, total, u.Total.Cost.In("USD"), "running total after request %d", i+1)
		require.Zero(t, u.Usage.Unpriced)
	}
	done := find[keel.RunCompleted](t, res.Events)[0]
	require.Equal(t, want[1]+want[2], done.Usage.Cost.In("USD"), "run.completed carries the kept responses' cost")
	require.Equal(t, &res.Outcome.UsageTotal, done.UsageTotal, "and what the run spent, the failed attempt included")
	require.Equal(t, total, res.Outcome.UsageTotal.Cost.In("USD"))
	require.Equal(t, want[1]+want[2], res.Outcome.Usage.Cost.In("USD"))
}

// A model without a price is counted in tokens and flagged, never given
// a made-up cost.
func TestUnpricedModelShowsTokensOnly(t *testing.T) {
	env := newRunEnv(t, `{"turns":[{"text":["hi"],"usage":{"input_tokens":10,"output_tokens":2,"cost":[{"currency":"USD","nanos":99}]}}]}`)
	env.acts.Policy.Prices = map[string]keel.Price{"openai:other": testPrice}
	res := env.execSession(t, promptOf("hi"))
	u := find[keel.UsageUpdated](t, res.Events)[0]
	require.Empty(t, u.Usage.Cost, "the provider's claimed cost is not kept")
	require.Equal(t, 1, u.Usage.Unpriced)
	require.Equal(t, int64(10), u.Usage.InputTokens)
	require.Equal(t, 1, res.Outcome.UsageTotal.Unpriced)
}

// A run budget warns once when spending reaches its fraction, then ends
// the run before the first request whose estimate would pass it: with
// run.failed keel.BudgetExceeded, the steps done committed, and no
// request sent past it.
func TestBudgetWarnsThenStopsAtTheRightRequest(t *testing.T) {
	// Each request: 1,000 prompt + 100 answer tokens = 1.10 USD. Its
	// estimate: a short prompt plus max_tokens 1,000 = just over 1 USD.
	// Budget 4 USD: after 3 requests 3.30 spent (warning at 3.20); 3.30 +
	// 1.0x > 4, so the fourth is refused.
	usage := `{"input_tokens":1000,"output_tokens":100}`
	script := `{"turns":[` + echoTurn("c1", usage) + `,` + echoTurn("c2", usage) + `,` + echoTurn("c3", usage) + `,` +
		echoTurn("c4", usage) + `,{"text":["never"]}]}`
	env := newRunEnv(t, script)
	env.acts.Policy.Prices = map[string]keel.Price{"scripted:test": testPrice}
	in := promptOf("hi", "echo")
	in.Config.MaxTokens = 1000
	in.Config.Budget = &api.Budget{Max: 4, Currency: "USD"}
	res := env.execSession(t, in)

	require.Equal(t, keel.StatusFailed, res.Outcome.Status)
	require.Equal(t, keel.CodeBudgetExceeded, failure(t, res.Outcome).Code)
	require.ErrorIs(t, res.Outcome.Error, keel.ErrBudgetExceeded)
	require.Contains(t, failure(t, res.Outcome).Message, "the run budget (set by the caller) has 0.70 USD left of 4.00 USD")
	require.Len(t, find[keel.UsageUpdated](t, res.Events), 3, "no fourth request was sent")
	require.Equal(t, 3, res.Outcome.UsageTotal.Requests)

	warns := find[keel.BudgetWarning](t, res.Events)
	require.Equal(t, []keel.BudgetWarning{{Step: 3, Scope: keel.BudgetRun, Set: "caller", Currency: "USD",
		Limit: 4_000_000_000, Spent: 3_300_000_000}}, warns, "one warning, after the request that passed 80 %")
	failed := find[keel.RunFailed](t, res.Events)
	require.Len(t, failed, 1)
	require.Equal(t, keel.CodeBudgetExceeded, failed[0].Code)
	require.Equal(t, int64(3_300_000_000), failed[0].UsageTotal.Cost.In("USD"), "run.failed carries what the run spent")
	// Steps 1-3 and their tool results are committed: the run's
	// messages are the prompt, three assistant turns and three results.
	require.Len(t, res.Messages, 7)
}

// The worker's ceiling holds a run that set no budget of its own, and a
// token budget counts prompt and answer tokens.
func TestWorkerCeilingHoldsEveryRun(t *testing.T) {
	usage := `{"input_tokens":1000,"output_tokens":100}`
	env := newRunEnv(t, `{"turns":[`+echoTurn("c1", usage)+`,`+echoTurn("c2", usage)+`,{"text":["never"]}]}`)
	env.acts.Policy.RunBudget = &api.Budget{MaxTokens: 2500}
	in := promptOf("hi", "echo")
	in.Config.MaxTokens = 500
	res := env.execSession(t, in)
	require.Equal(t, keel.CodeBudgetExceeded, failure(t, res.Outcome).Code)
	require.Contains(t, failure(t, res.Outcome).Message, "set by the worker")
	require.Len(t, find[keel.UsageUpdated](t, res.Events), 2)
	require.Equal(t, []keel.BudgetWarning{{Step: 2, Scope: keel.BudgetRun, Set: "worker", Limit: 2500, Spent: 2200}},
		find[keel.BudgetWarning](t, res.Events))
}

// A money budget cannot be kept for a model without a price in its
// currency: the request is refused rather than sent blind.
func TestMoneyBudgetFailsClosedWithoutAPrice(t *testing.T) {
	env := newRunEnv(t, `{"turns":[{"text":["never"]}]}`)
	env.acts.Policy.Prices = map[string]keel.Price{"scripted:test": {Currency: "EUR", Input: 1, Output: 1}}
	in := promptOf("hi")
	in.Config.Budget = &api.Budget{Max: 1, Currency: "USD"}
	res := env.execSession(t, in)
	require.Equal(t, keel.CodeBudgetExceeded, failure(t, res.Outcome).Code)
	require.Contains(t, failure(t, res.Outcome).Message, "has no price in USD")
	require.Empty(t, find[keel.UsageUpdated](t, res.Events))
}

// A session budget counts what the session's earlier runs spent.
func TestSessionBudgetCountsEarlierRuns(t *testing.T) {
	env := newRunEnv(t, `{"turns":[{"text":["never"]}]}`)
	env.acts.Policy.Prices = map[string]keel.Price{"scripted:test": testPrice}
	in := promptOf("hi")
	in.Config.MaxTokens = 100
	in.Config.SessionBudget = &api.Budget{Max: 5, Currency: "USD"}
	in.Carry = &carry.SessionCarry{Usage: keel.Usage{Requests: 9, Cost: keel.Costs{{Currency: "USD", Nanos: 4_950_000_000}}}}
	res := env.execSession(t, in)
	require.Equal(t, keel.CodeBudgetExceeded, failure(t, res.Outcome).Code)
	require.Contains(t, failure(t, res.Outcome).Message, "the session budget (set by the caller) has 0.05 USD left of 5.00 USD")
}

// A caller may lower the operator's ceiling, never raise it, and a money
// budget must be in the ceiling's currency; the refusal comes before
// history, and a budget within the ceiling is accepted.
func TestBudgetAboveTheCeilingIsRefused(t *testing.T) {
	rules := workflows.Rules{RunBudget: &api.Budget{Max: 5, Currency: "USD"}, SessionBudget: &api.Budget{MaxTokens: 1000}}
	env := newRulesEnv(t, `{"repeat":true,"turns":[{"text":["ok"]}]}`, rules)
	u := newUpdates(t, env)
	with := func(run, session *api.Budget) api.SendRequest {
		return api.SendRequest{Prompt: "hi", IfActive: api.IfActiveQueue, Config: &api.RunConfig{Budget: run, SessionBudget: session}}
	}
	env.RegisterDelayedCallback(func() {
		u.send(api.UpdateSend, "raise", with(&api.Budget{Max: 5.01, Currency: "USD"}, nil))
		u.send(api.UpdateSend, "other-currency", with(&api.Budget{Max: 1, Currency: "EUR"}, nil))
		u.send(api.UpdateSend, "raise-session", with(nil, &api.Budget{MaxTokens: 1001}))
		u.send(api.UpdateSend, "nan-ish", with(&api.Budget{Max: -1, Currency: "USD"}, nil))
		u.send(api.UpdateSend, "lower", with(&api.Budget{Max: 0.5, Currency: "USD"}, &api.Budget{MaxTokens: 10}))
	}, 0)
	env.RegisterDelayedCallback(func() {}, time.Second)
	env.ExecuteWorkflow(api.SessionWorkflowName, sessionInput("s1", napConfig))

	for id, want := range map[string]string{
		"raise":          "budget of 5.01 USD is above this worker's ceiling of 5.00 USD",
		"other-currency": "budget is in EUR; this worker's ceiling is in USD",
		"raise-session":  "session_budget of 1001 tokens is above this worker's ceiling of 1000",
		"nan-ish":        "budget.max must be a finite amount, 0 or more",
	} {
		e := u.rejected[id]
		require.NotNil(t, e, "%s was refused", id)
		require.Equal(t, keel.CodeInvalidInput, e.Code, id)
		require.True(t, strings.Contains(e.Message, want), "%s: %q", id, e.Message)
	}
	require.Contains(t, u.accepted, "lower")
	require.Len(t, u.rejected, 4)
}

// A provider's usage report is hostile input (docs/contract.md §20.6):
// negative counts are counted as none, so they give no budget back, and
// overflow-sized ones as keel.MaxRequestTokens, so no cost wraps negative;
// the budget then stops the run at the next request.
func TestAbsurdUsageCannotBreakABudget(t *testing.T) {
	script := `{"turns":[` +
		echoTurn("c1", `{"input_tokens":-1000000000,"output_tokens":-1000000000,"cache_read_tokens":-7}`) + `,` +
		echoTurn("c2", `{"input_tokens":9223372036854775807,"output_tokens":9223372036854775807,"cache_write_tokens":9223372036854775807}`) + `,` +
		`{"text":["never"]}]}`
	env := newRunEnv(t, script)
	env.acts.Policy.Prices = map[string]keel.Price{"scripted:test": testPrice}
	in := promptOf("hi", "echo")
	in.Config.MaxTokens = 100
	in.Config.Budget = &api.Budget{Max: 5, Currency: "USD", MaxTokens: 10_000}
	res := env.execSession(t, in)

	ups := find[keel.UsageUpdated](t, res.Events)
	require.Len(t, ups, 2, "the third request was never sent")
	require.Equal(t, keel.Usage{Requests: 1, Cost: keel.Costs{{Currency: "USD", Prices: "test table"}}}, ups[0].Usage,
		"negative counts are counted as none, at no cost")
	const most = keel.MaxRequestTokens
	require.Equal(t, int64(most), ups[1].Usage.InputTokens)
	require.Equal(t, int64(most), ups[1].Usage.OutputTokens)
	require.Equal(t, int64(most), ups[1].Usage.CacheWriteTokens)
	// At the test price a token costs a thousandth of a unit (1e6 nanos):
	// the whole prompt was a cache write (at the input price), and the
	// answer.
	want := 2 * int64(most) * 1_000_000
	require.Equal(t, want, ups[1].Usage.Cost.In("USD"))
	require.Equal(t, want, ups[1].Total.Cost.In("USD"), "the total is the sum, not less")
	require.Equal(t, 2*int64(most), ups[1].Total.Tokens())

	require.Equal(t, keel.CodeBudgetExceeded, failure(t, res.Outcome).Code)
	require.Equal(t, want, res.Outcome.UsageTotal.Cost.In("USD"))
	require.Len(t, find[keel.RunFailed](t, res.Events), 1)
}

// docs/contract.md §20.2: every run ends with usage_total on its terminal
// event, with or without prices or budgets, even one a budget refused
// before it spent anything.
func TestTerminalEventCarriesUsageTotal(t *testing.T) {
	script := `{"turns":[{"text":["hi"],"usage":{"input_tokens":10,"output_tokens":2}}]}`
	for name, c := range map[string]struct {
		prices map[string]keel.Price
		budget *api.Budget
	}{
		"no money":            {},
		"priced":              {prices: map[string]keel.Price{"scripted:test": testPrice}},
		"unpriced on a table": {prices: map[string]keel.Price{"openai:other": testPrice}},
		"a token budget":      {budget: &api.Budget{MaxTokens: 100_000}},
		"refused at once":     {budget: &api.Budget{MaxTokens: 10}},
	} {
		t.Run(name, func(t *testing.T) {
			env := newRunEnv(t, script)
			env.acts.Policy.Prices = c.prices
			in := promptOf("hi")
			in.Config.Budget = c.budget
			res := env.execSession(t, in)
			var total *keel.Usage
			switch e := decode(t, res.Events)[len(res.Events)-1].(type) {
			case keel.RunCompleted:
				total = e.UsageTotal
			case keel.RunFailed:
				require.Equal(t, keel.CodeBudgetExceeded, e.Code)
				total = e.UsageTotal
			default:
				t.Fatalf("ended with %T", e)
			}
			require.Equal(t, &res.Outcome.UsageTotal, total)
		})
	}
}

// A caller who skips keel's clients and sends a hostile budget straight
// to the session's send update is refused by the session's validator,
// before history, with keel.InvalidInput naming the field and never
// echoing the value; nothing runs (docs/contract.md §20.3).
func TestHostileBudgetsRefusedBeforeHistory(t *testing.T) {
	env := newRulesEnv(t, `{"repeat":true,"turns":[{"text":["ok"]}]}`, workflows.Rules{})
	u := newUpdates(t, env)
	hostile := map[string]*api.Budget{
		"huge":          {Max: 1e300, Currency: "USD"},
		"past int64":    {Max: 9.3e9, Currency: "USD"},
		"negative":      {Max: -0.01, Currency: "USD"},
		"markup":        {Max: 1, Currency: "<b>"},
		"long currency": {Max: 1, Currency: strings.Repeat("U", 1<<12)},
		"no currency":   {Max: 1},
		"tokens below":  {MaxTokens: -1},
		"warn past one": {MaxTokens: 5, WarnAt: 1},
		"warn below":    {MaxTokens: 5, WarnAt: -0.5},
	}
	env.RegisterDelayedCallback(func() {
		for name, b := range hostile {
			u.send(api.UpdateSend, "run "+name, api.SendRequest{Prompt: "hi", Config: &api.RunConfig{Budget: b}})
			u.send(api.UpdateSend, "session "+name, api.SendRequest{Prompt: "hi", Config: &api.RunConfig{SessionBudget: b}})
		}
	}, 0)
	env.RegisterDelayedCallback(func() {}, time.Second)
	env.ExecuteWorkflow(api.SessionWorkflowName, sessionInput("s1", napConfig))

	require.Empty(t, u.accepted)
	require.Len(t, u.rejected, 2*len(hostile))
	for id, e := range u.rejected {
		field := "budget"
		if strings.HasPrefix(id, "session ") {
			field = "session_budget"
		}
		require.Equal(t, keel.CodeInvalidInput, e.Code, id)
		require.True(t, strings.HasPrefix(e.Message, field+"."), "%s: %q names the field", id, e.Message)
		require.NotContains(t, e.Message, "<b>", id)
		require.Less(t, len(e.Message), 200, id)
	}
}
