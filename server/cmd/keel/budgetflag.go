package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
)

// budgetFlag is --budget and --session-budget: "0.50" (USD), "0.50 EUR",
// "0.50EUR" or "20000 tokens" (docs/contract.md §20).
type budgetFlag struct {
	text string
	b    *api.Budget
}

func (f *budgetFlag) String() string { return f.text }

func (f *budgetFlag) Set(s string) error {
	b, err := parseBudget(s)
	if err != nil {
		return err
	}
	f.text, f.b = s, b
	return nil
}

// parseBudget reads a budget as the flags take it.
func parseBudget(s string) (*api.Budget, error) {
	t := strings.TrimSpace(s)
	if n, ok := strings.CutSuffix(t, "tokens"); ok {
		v, err := strconv.ParseInt(strings.TrimSpace(n), 10, 64)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("want a whole number of tokens above 0, as in \"20000 tokens\"")
		}
		return &api.Budget{MaxTokens: v}, nil
	}
	num, cur := t, "USD"
	if i := strings.IndexFunc(t, func(r rune) bool { return r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' }); i >= 0 {
		num, cur = strings.TrimSpace(t[:i]), strings.ToUpper(strings.TrimSpace(t[i:]))
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v <= 0 {
		return nil, fmt.Errorf("want an amount above 0, as in 0.50 or \"0.50 EUR\"")
	}
	b := &api.Budget{Max: v, Currency: cur}
	if err := b.Validate("budget"); err != nil {
		return nil, fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "keel: budget."))
	}
	return b, nil
}

// costNote is the cost part of a usage line: " · 0.0123 USD (keel.yaml)",
// with "≥" when some requests had no price, or "" when none had one.
func costNote(u keel.Usage) string {
	if len(u.Cost) == 0 {
		return ""
	}
	s := " · "
	if u.Unpriced > 0 {
		s += "≥ "
	}
	s += u.Cost.String()
	if src := u.Cost[0].Prices; src != "" {
		s += " (" + sanitizeLine(src) + ")"
	}
	return s
}
