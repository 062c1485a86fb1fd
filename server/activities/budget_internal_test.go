package activities

import (
	"math"
	"testing"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
)

// A scope whose recorded spending saturated (docs/contract.md §20.6: sums
// never wrap) admits nothing more: the check compares without adding, so
// what was spent plus the estimate cannot wrap into a pass.
func TestAdmitNeverWrapsIntoAPass(t *testing.T) {
	price := keel.Price{Currency: "USD", Input: 1e6, Output: 1e6}
	var p Policy
	for name, check := range map[string]*BudgetCheck{
		"money": {Run: &api.Budget{Max: 1e9, Currency: "USD"},
			RunSpent: keel.Usage{Cost: keel.Costs{{Currency: "USD", Nanos: math.MaxInt64}}}},
		"tokens": {Session: &api.Budget{MaxTokens: math.MaxInt64},
			SessionSpent: keel.Usage{InputTokens: math.MaxInt64, OutputTokens: math.MaxInt64}},
		"estimate past the limit": {Run: &api.Budget{Max: 1, Currency: "USD"}},
	} {
		r := admit(p.limits(check), check, price, true, "m", math.MaxInt64, math.MaxInt64)
		if r == nil {
			t.Errorf("%s: admitted", name)
		}
	}
	// Nothing spent and an estimate within the limit passes.
	ok := &BudgetCheck{Run: &api.Budget{Max: 1, Currency: "USD", MaxTokens: 1000}}
	cheap := keel.Price{Currency: "USD", Input: 1, Output: 1}
	if r := admit(p.limits(ok), ok, cheap, true, "m", 10, 10); r != nil {
		t.Errorf("a request within the budget was refused: %s", r.Message)
	}
}
