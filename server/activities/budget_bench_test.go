package activities_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/provider/scripted"
)

// BenchmarkModelTurnCostAccounting measures what docs/contract.md §20
// adds to one model turn on the worker: the same ModelTurn activity (a
// scripted model's answer over a 40-message transcript, through
// Temporal's test activity environment, payloads encoded and decoded) is
// run with a price table and run and session budgets, money and tokens
// (the price looked up, the request estimated and admitted, its usage
// priced, the larger input and result carried), and without, alternating
// in the same run. It reports each one's time per turn, the median of the
// ratios of pairs run back to back and the ratio of the sums, and the
// bytes the accounting adds to the history per turn:
//
//	go test -run '^$' -bench CostAccounting -benchtime 2000x ./server/activities/
func BenchmarkModelTurnCostAccounting(b *testing.B) {
	s, err := scripted.Parse([]byte(`{"repeat":true,"turns":[{"text":["The answer."],` +
		`"usage":{"input_tokens":4000,"cache_read_tokens":3000,"output_tokens":40}}]}`))
	if err != nil {
		b.Fatal(err)
	}
	var msgs []keel.Message
	for i := range 20 {
		msgs = append(msgs, keel.UserMessage(strings.Repeat("question ", 20+i)),
			keel.Message{Role: keel.RoleAssistant, Content: strings.Repeat("answer ", 20+i)})
	}
	msgs = append(msgs, keel.UserMessage("and now?"))
	in := turnInput(msgs...)
	in.Model, in.MaxTokens = "scripted:bench", 1000

	plain := newTurnEnv(&activities.Activities{Models: fixedModels{scripted.New(s)}})
	priced := newTurnEnv(&activities.Activities{Models: fixedModels{scripted.New(s)}, Policy: activities.Policy{
		Prices:        map[string]keel.Price{"scripted:bench": {Currency: "USD", Input: 3, Output: 15, CachedInput: 0.3, CacheWrite: 3.75, Prices: "bench"}},
		RunBudget:     &api.Budget{Max: 1000, Currency: "USD"},
		SessionBudget: &api.Budget{MaxTokens: 1e12},
	}})
	pricedIn := in
	spent := keel.Usage{InputTokens: 40_000, OutputTokens: 400, Requests: 10, Cost: keel.Costs{{Currency: "USD", Nanos: 126_000_000}}}
	pricedIn.Budget = &activities.BudgetCheck{Run: &api.Budget{Max: 100, Currency: "USD", MaxTokens: 1e9},
		Session: &api.Budget{Max: 500, Currency: "USD"}, RunSpent: spent, SessionSpent: spent}

	// Each pair runs back to back, in alternating order: the median of the
	// pairs' ratios stays put while the shared machine's load comes and
	// goes, as sums over the whole run do not.
	ratios := make([]float64, 0, b.N)
	var took [2]time.Duration
	var results [2]activities.ModelTurnResult
	run := func(i int) time.Duration {
		env, turnIn := plain, in
		if i == 1 {
			env, turnIn = priced, pricedIn
		}
		start := time.Now()
		v, err := env.ExecuteActivity(activities.ModelTurnName, turnIn)
		if err != nil {
			b.Fatal(err)
		}
		var res activities.ModelTurnResult
		if err := v.Get(&res); err != nil {
			b.Fatal(err)
		}
		d := time.Since(start)
		took[i] += d
		if (i == 1) != (len(res.Response.Usage.Cost) == 1) {
			b.Fatalf("variant %d: cost %v", i, res.Response.Usage.Cost)
		}
		results[i] = res
		return d
	}
	b.ResetTimer()
	for n := range b.N {
		var d [2]time.Duration
		first := n % 2
		d[first] = run(first)
		d[1-first] = run(1 - first)
		ratios = append(ratios, float64(d[1])/float64(d[0]))
	}
	b.StopTimer()
	slices.Sort(ratios)
	b.ReportMetric(float64(took[0].Nanoseconds())/float64(b.N)/1e3, "µs/turn-without")
	b.ReportMetric(float64(took[1].Nanoseconds())/float64(b.N)/1e3, "µs/turn-with")
	b.ReportMetric(ratios[len(ratios)/2], "with/without-median")
	b.ReportMetric(float64(took[1])/float64(took[0]), "with/without-sum")
	// What the history holds more per request: the turn's input with its
	// budget check and its result with the cost and the limits.
	size := func(v any) int {
		j, err := json.Marshal(v)
		if err != nil {
			b.Fatal(err)
		}
		return len(j)
	}
	b.ReportMetric(float64(size(pricedIn)-size(in)+size(results[1])-size(results[0])), "history-bytes-more/turn")
}
