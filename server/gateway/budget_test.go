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

// A reasoning setting that is not one is refused before any call, typed
// keel.InvalidInput and clipped; a good one is sent as the run's config.
func TestRunRequestReasoning(t *testing.T) {
	for name, r := range map[string]*keel.Reasoning{
		"unknown effort": {Effort: keel.ReasoningEffort(strings.Repeat("x", 1<<12))},
		"tiny budget":    {BudgetTokens: 10},
		"huge budget":    {BudgetTokens: 1 << 30},
	} {
		_, err := gateway.RunRequest{Prompt: "hi", Reasoning: r}.Validate()
		if !errors.Is(err, keel.ErrInvalidInput) || len(err.Error()) > 200 || !strings.Contains(err.Error(), "reasoning") {
			t.Errorf("%s: %v", name, err)
		}
	}
	opts, err := gateway.RunRequest{Prompt: "hi", Reasoning: &keel.Reasoning{Effort: keel.ReasoningHigh}}.Validate()
	if err != nil || len(opts) != 1 {
		t.Errorf("a good setting: %d options, %v", len(opts), err)
	}
}
