package activities

import (
	"fmt"
	"math"

	"go.temporal.io/sdk/temporal"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
)

// estimatedAnswerTokens is the answer a budget check assumes for a request
// that sets no max_tokens: the most it plans for before the provider says.
const estimatedAnswerTokens = 4096

// BudgetCheck is what a model request must fit in (docs/contract.md §20):
// the budgets the run's configuration set, and what the run and the
// session had spent before the request, as the workflow recorded it.
type BudgetCheck struct {
	Run          *api.Budget `json:"run,omitempty"`
	Session      *api.Budget `json:"session,omitempty"`
	RunSpent     keel.Usage  `json:"run_spent"`
	SessionSpent keel.Usage  `json:"session_spent"`
}

// BudgetLimit is one limit a request was held to: a money limit in nanos
// of Currency, or a token limit (Currency empty).
type BudgetLimit struct {
	Scope    string  `json:"scope"`
	Set      string  `json:"set"`
	Currency string  `json:"currency,omitempty"`
	Limit    int64   `json:"limit"`
	WarnAt   float64 `json:"warn_at"`
}

// Spent returns what usage u counts against l.
func (l BudgetLimit) Spent(u keel.Usage) int64 {
	if l.Currency == "" {
		return u.Tokens()
	}
	return u.Cost.In(l.Currency)
}

// BudgetRefusal is the detail of a request a budget refused.
type BudgetRefusal struct {
	Limit BudgetLimit `json:"limit"`
	// Spent is what the scope had spent; Estimate the most the request
	// could cost (-1: it has no price in the limit's currency).
	Spent    int64  `json:"spent"`
	Estimate int64  `json:"estimate"`
	Message  string `json:"message"`
}

// limits returns every limit a request of check is held to: the caller's
// budgets and the worker's ceilings, each on its own (the stricter binds).
func (p *Policy) limits(check *BudgetCheck) []BudgetLimit {
	var out []BudgetLimit
	add := func(scope, set string, b *api.Budget) {
		if b.IsZero() {
			return
		}
		if b.Max > 0 {
			out = append(out, BudgetLimit{Scope: scope, Set: set, Currency: b.Currency, Limit: b.MaxNanos(), WarnAt: b.Warn()})
		}
		if b.MaxTokens > 0 {
			out = append(out, BudgetLimit{Scope: scope, Set: set, Limit: b.MaxTokens, WarnAt: b.Warn()})
		}
	}
	if check != nil {
		add(keel.BudgetRun, "caller", check.Run)
		add(keel.BudgetSession, "caller", check.Session)
	}
	add(keel.BudgetRun, "worker", p.RunBudget)
	add(keel.BudgetSession, "worker", p.SessionBudget)
	return out
}

// admit refuses a request that could spend more than a limit leaves: its
// prompt of about prompt tokens at full price plus maxOut tokens of
// answer. A money limit cannot be kept for a model without a price in its
// currency, so such a request is refused too: keel fails closed.
func admit(limits []BudgetLimit, check *BudgetCheck, price keel.Price, priced bool, model string, prompt, maxOut int64) *BudgetRefusal {
	if check == nil {
		check = &BudgetCheck{}
	}
	prompt, maxOut = max(prompt, 0), max(maxOut, 0)
	for _, l := range limits {
		spent := check.RunSpent
		if l.Scope == keel.BudgetSession {
			spent = check.SessionSpent
		}
		have := l.Spent(spent)
		var est int64
		switch {
		case l.Currency == "":
			est = prompt + min(maxOut, math.MaxInt64-prompt)
		case !priced || price.Currency != l.Currency:
			return &BudgetRefusal{Limit: l, Spent: have, Estimate: -1, Message: fmt.Sprintf(
				"model %s has no price in %s, so the %s budget (set by the %s) cannot be kept", model, l.Currency, l.Scope, l.Set)}
		default:
			est = price.Estimate(prompt, maxOut)
		}
		// have and est are at most math.MaxInt64 each: compare without
		// adding them, so a saturated sum cannot wrap into a pass.
		have = max(have, 0)
		if have > l.Limit || est > l.Limit-have {
			return &BudgetRefusal{Limit: l, Spent: have, Estimate: est, Message: fmt.Sprintf(
				"the next request could spend %s and the %s budget (set by the %s) has %s left of %s",
				l.format(est), l.Scope, l.Set, l.format(max(l.Limit-have, 0)), l.format(l.Limit))}
		}
	}
	return nil
}

// format shows an amount of l's unit.
func (l BudgetLimit) format(n int64) string {
	if l.Currency == "" {
		return fmt.Sprintf("%d tokens", n)
	}
	return keel.FormatNanos(n) + " " + l.Currency
}

// budgetError is the failure of a refused request: non-retryable, typed
// keel.BudgetExceeded, with the refusal as its detail.
func budgetError(r *BudgetRefusal) error {
	return temporal.NewApplicationErrorWithOptions(r.Message, string(keel.CodeBudgetExceeded), temporal.ApplicationErrorOptions{
		NonRetryable: true,
		Details:      []any{TurnFailure{Budget: r}},
	})
}

// priceOf returns the price of a request to model (the provider's model
// ID) of provider, asked for as spec: the price table's entry for the
// spec as the run named it, else for "provider:model".
func (p *Policy) priceOf(spec, providerName, model string) (keel.Price, bool) {
	if pr, ok := p.Prices[spec]; ok {
		return pr, true
	}
	pr, ok := p.Prices[providerName+":"+model]
	return pr, ok
}

// bill adds a request's cost to its usage: priced at pr, or, when the
// worker has a price table without the model, counted as unpriced (a
// worker with no table at all counts tokens only). A cost the provider's
// usage claimed is never kept: only the worker's table prices. The
// provider's token counts are bounded first (keel.Usage.Bounded): a
// negative or overflow-sized report counts as 0 or keel.MaxRequestTokens.
func (p *Policy) bill(u keel.Usage, pr keel.Price, priced bool) keel.Usage {
	u = u.Bounded()
	u.Cost, u.Unpriced = nil, 0
	if !priced {
		if len(p.Prices) > 0 {
			u.Unpriced = 1
		}
		return u
	}
	c := pr.Cost(u)
	u.Cost = keel.Costs{c}
	return u
}
