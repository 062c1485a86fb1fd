package gateway_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/server/gateway"
)

// A hostile run budget in a body is refused before any call, typed
// keel.InvalidInput, without echoing what it sent (docs/contract.md §20.3).
func TestRunRequestRefusesHostileBudgets(t *testing.T) {
	for name, b := range map[string]*api.Budget{
		"huge":            {Max: 1e300, Currency: "USD"},
		"negative":        {Max: -1, Currency: "USD"},
		"infinite":        {Max: math.Inf(1), Currency: "USD"},
		"markup currency": {Max: 1, Currency: "<b>"},
		"long currency":   {Max: 1, Currency: strings.Repeat("U", 1<<16)},
		"no currency":     {Max: 1},
		"currency alone":  {Currency: "USD"},
		"negative tokens": {MaxTokens: -5},
		"warn past one":   {MaxTokens: 5, WarnAt: 1.5},
	} {
		for _, field := range []string{"budget", "session_budget"} {
			req := gateway.RunRequest{Prompt: "hi", Budget: b}
			if field == "session_budget" {
				req = gateway.RunRequest{Prompt: "hi", SessionBudget: b}
			}
			_, err := req.Validate()
			if !errors.Is(err, keel.ErrInvalidInput) {
				t.Errorf("%s %s: %v, want keel.InvalidInput", name, field, err)
				continue
			}
			if msg := err.Error(); !strings.Contains(msg, field) || strings.Contains(msg, "<b>") || len(msg) > 200 {
				t.Errorf("%s %s: the error %q does not name the field, or echoes what was sent", name, field, msg)
			}
		}
	}
	if _, err := (gateway.RunRequest{Prompt: "hi", Budget: &api.Budget{Max: 0.5, Currency: "EUR", MaxTokens: 100, WarnAt: 0.5}}).Validate(); err != nil {
		t.Errorf("a good budget: %v", err)
	}
}
