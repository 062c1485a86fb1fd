package api

import (
	"fmt"
	"math"

	"github.com/keelrun/keel"
)

// Budget bounds what a run or a session may spend (docs/contract.md §20):
// money in one currency, tokens, or both. The worker's keel.yaml sets
// ceilings; a caller's budget can be lower, never higher.
type Budget struct {
	// Max is the most it may cost, in Currency units (0.50). Zero: no
	// money limit.
	Max float64 `json:"max,omitempty"`
	// Currency is the three-letter code of Max ("USD"). Needed with Max.
	Currency string `json:"currency,omitempty"`
	// MaxTokens is the most prompt and answer tokens it may use. Zero: no
	// token limit.
	MaxTokens int64 `json:"max_tokens,omitempty"`
	// WarnAt is the fraction of a limit at which a budget.warning event is
	// recorded, above 0 and below 1. Zero: DefaultWarnAt.
	WarnAt float64 `json:"warn_at,omitempty"`
}

// DefaultWarnAt is the fraction of a budget that brings a budget.warning.
const DefaultWarnAt = 0.8

// IsZero reports whether b limits nothing.
func (b *Budget) IsZero() bool { return b == nil || (b.Max == 0 && b.MaxTokens == 0) }

// MaxNanos returns Max in nanos of Currency.
func (b *Budget) MaxNanos() int64 {
	n, _ := keel.NanosOf(b.Max)
	return n
}

// Warn returns the warning fraction, its default filled in.
func (b *Budget) Warn() float64 {
	if b.WarnAt <= 0 || b.WarnAt >= 1 {
		return DefaultWarnAt
	}
	return b.WarnAt
}

// Validate checks b as a caller or an operator wrote it; what names the
// field in the error ("budget", "session_budget").
func (b *Budget) Validate(what string) error {
	if b == nil {
		return nil
	}
	if b.Max < 0 || math.IsNaN(b.Max) || math.IsInf(b.Max, 0) {
		return keel.Errorf(keel.CodeInvalidInput, "%s.max must be a finite amount, 0 or more", what)
	}
	if _, ok := keel.NanosOf(b.Max); !ok {
		return keel.Errorf(keel.CodeInvalidInput, "%s.max is too large", what)
	}
	if b.Max > 0 {
		if err := (keel.Price{Currency: b.Currency}).Validate(); err != nil {
			return keel.Errorf(keel.CodeInvalidInput, "%s.currency: %v", what, err)
		}
	} else if b.Currency != "" {
		return keel.Errorf(keel.CodeInvalidInput, "%s.currency is set without %s.max", what, what)
	}
	if b.MaxTokens < 0 {
		return keel.Errorf(keel.CodeInvalidInput, "%s.max_tokens cannot be negative", what)
	}
	if b.WarnAt < 0 || b.WarnAt >= 1 || math.IsNaN(b.WarnAt) {
		return keel.Errorf(keel.CodeInvalidInput, "%s.warn_at must be a fraction from 0 to below 1", what)
	}
	return nil
}

// Within reports why b asks for more than ceiling allows, or nil: a
// caller may lower an operator's ceiling, never raise it, and a money
// budget must be in the ceiling's currency. A nil ceiling allows
// anything.
func (b *Budget) Within(ceiling *Budget, what string) error {
	if ceiling.IsZero() || b.IsZero() {
		return nil
	}
	if ceiling.Max > 0 && b.Max > 0 {
		if b.Currency != ceiling.Currency {
			return keel.Errorf(keel.CodeInvalidInput, "%s is in %s; this worker's ceiling is in %s", what, b.Currency, ceiling.Currency)
		}
		if b.MaxNanos() > ceiling.MaxNanos() {
			return keel.Errorf(keel.CodeInvalidInput, "%s of %s %s is above this worker's ceiling of %s %s",
				what, keel.FormatNanos(b.MaxNanos()), b.Currency, keel.FormatNanos(ceiling.MaxNanos()), ceiling.Currency)
		}
	}
	if ceiling.MaxTokens > 0 && b.MaxTokens > ceiling.MaxTokens {
		return keel.Errorf(keel.CodeInvalidInput, "%s of %d tokens is above this worker's ceiling of %d", what, b.MaxTokens, ceiling.MaxTokens)
	}
	return nil
}

// String describes b for messages: "5.00 USD, 100000 tokens".
func (b *Budget) String() string {
	switch {
	case b.IsZero():
		return "none"
	case b.Max > 0 && b.MaxTokens > 0:
		return fmt.Sprintf("%s %s, %d tokens", keel.FormatNanos(b.MaxNanos()), b.Currency, b.MaxTokens)
	case b.Max > 0:
		return keel.FormatNanos(b.MaxNanos()) + " " + b.Currency
	default:
		return fmt.Sprintf("%d tokens", b.MaxTokens)
	}
}
