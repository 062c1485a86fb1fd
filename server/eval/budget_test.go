package eval_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/server/eval"
)

// A case's run gets the lower of its own budget (or the worker's
// ceiling, which it would get without one) and what is left of the
// eval's, limit by limit; never a money limit in another currency than
// the ceiling's, which the worker would refuse.
func TestRunBudget(t *testing.T) {
	usd := func(max float64, tokens int64) *api.Budget {
		b := &api.Budget{Max: max, MaxTokens: tokens}
		if max > 0 {
			b.Currency = "USD"
		}
		return b
	}
	eur := &api.Budget{Max: 2, Currency: "EUR"}
	for _, c := range []struct {
		name               string
		own, left, ceiling *api.Budget
		want               *api.Budget
	}{
		{"no eval budget", usd(1, 0), nil, nil, usd(1, 0)},
		{"nothing of its own", nil, usd(0.5, 100), nil, usd(0.5, 100)},
		{"its own is lower", usd(0.2, 50), usd(0.5, 100), nil, usd(0.2, 50)},
		{"what is left is lower", usd(1, 500), usd(0.5, 100), nil, usd(0.5, 100)},
		{"a limit it lacks", usd(0, 500), usd(0.5, 0), nil, usd(0.5, 500)},
		{"the ceiling, lowered", nil, usd(0.5, 0), usd(3, 0), usd(0.5, 0)},
		{"the ceiling is lower", nil, usd(5, 0), usd(3, 0), usd(3, 0)},
		{"another currency than the ceiling's", nil, usd(5, 80), eur, &api.Budget{Max: 2, Currency: "EUR", MaxTokens: 80}},
		{"another currency than its own", eur, usd(5, 0), nil, eur},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, eval.RunBudget(c.own, c.left, c.ceiling))
		})
	}
}
