package workflows_test

import (
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/carry"
	"github.com/keelrun/keel/server/provider/scripted"
)

// BenchmarkRunCostAccounting measures what docs/contract.md §20 adds to a
// run, workflow and worker together: the same run of ten model
// turns and ten tool calls, in Temporal's test environment, with a price
// table, run and session budgets (money and tokens) and the worker's
// ceilings, and without, the two run back to back in alternating order.
// It reports each one's time per model request and the median of the
// pairs' ratios:
//
//	go test -run '^$' -bench RunCostAccounting -benchtime 100x ./server/workflows/
func BenchmarkRunCostAccounting(b *testing.B) {
	turns := strings.Repeat(`{"tool_calls":[{"id":"c","name":"echo","arguments":{"text":"x"}}],"usage":{"input_tokens":4000,"cache_read_tokens":3000,"output_tokens":40}},`, 10)
	s, err := scripted.Parse([]byte(`{"turns":[` + turns + `{"text":["done"],"usage":{"input_tokens":4000,"output_tokens":40}}]}`))
	if err != nil {
		b.Fatal(err)
	}
	const requests = 11
	run := func(priced bool) time.Duration {
		var suite testsuite.WorkflowTestSuite
		suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
		env := newEnvOf(b, &suite, scripted.New(s))
		in := promptOf("go", "echo")
		in.Config.MaxTokens = 1000
		// A session with what its earlier runs spent, priced or not.
		in.Carry = &carry.SessionCarry{}
		if priced {
			env.acts.Policy.Prices = map[string]keel.Price{"scripted:test": {Currency: "USD", Input: 3, Output: 15, CachedInput: 0.3, Prices: "bench"}}
			env.acts.Policy.RunBudget = &api.Budget{Max: 1000, Currency: "USD"}
			env.acts.Policy.SessionBudget = &api.Budget{MaxTokens: 1e12}
			in.Config.Budget = &api.Budget{Max: 100, Currency: "USD", MaxTokens: 1e9}
			in.Config.SessionBudget = &api.Budget{Max: 500, Currency: "USD"}
			in.Carry.Usage = keel.Usage{InputTokens: 40_000, Requests: 10, Cost: keel.Costs{{Currency: "USD", Nanos: 126_000_000}}}
		}
		start := time.Now()
		res := env.execSession(b, in)
		took := time.Since(start)
		if res.Outcome.Status != keel.StatusCompleted {
			b.Fatalf("run: %+v", res.Outcome)
		}
		if priced != (len(res.Outcome.UsageTotal.Cost) == 1) || res.Outcome.UsageTotal.Requests != requests {
			b.Fatalf("priced %v: usage %+v", priced, res.Outcome.UsageTotal)
		}
		return took
	}
	ratios := make([]float64, 0, b.N)
	var took [2]time.Duration
	b.ResetTimer()
	for n := range b.N {
		var d [2]time.Duration
		first := n % 2
		d[first] = run(first == 1)
		d[1-first] = run(first != 1)
		took[0], took[1] = took[0]+d[0], took[1]+d[1]
		ratios = append(ratios, float64(d[1])/float64(d[0]))
	}
	b.StopTimer()
	slices.Sort(ratios)
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N*requests) / 1e3 }
	b.ReportMetric(per(took[0]), "µs/request-without")
	b.ReportMetric(per(took[1]), "µs/request-with")
	b.ReportMetric(ratios[len(ratios)/2], "with/without-median")
}
