package keel

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// NanosPerUnit is how many nanos make one unit of a currency: costs are
// counted in billionths, exactly, so sums over months never drift.
const NanosPerUnit = 1_000_000_000

// Cost is an amount of money in one currency (docs/contract.md §20).
type Cost struct {
	// Currency is an ISO 4217 code as the price table names it ("USD").
	Currency string `json:"currency"`
	// Nanos is the amount in billionths of the currency's unit.
	Nanos int64 `json:"nanos"`
	// Prices names the price table the amount was computed from
	// ("keel.yaml", or keel's dated default table): an estimate from list
	// prices, never a provider's bill. "mixed" when a sum drew on more
	// than one.
	Prices string `json:"prices,omitempty"`
}

// Amount returns c in units of its currency.
func (c Cost) Amount() float64 { return float64(c.Nanos) / NanosPerUnit }

// String formats c as "0.0123 USD": at least two decimals, at most nine,
// without trailing zeros past the second.
func (c Cost) String() string { return FormatNanos(c.Nanos) + " " + c.Currency }

// FormatNanos formats an amount in nanos as a decimal of the unit.
func FormatNanos(n int64) string {
	sign := ""
	u := uint64(n)
	if n < 0 {
		sign, u = "-", uint64(-n)
	}
	frac := fmt.Sprintf("%09d", u%NanosPerUnit)
	frac = strings.TrimRight(frac, "0")
	for len(frac) < 2 {
		frac += "0"
	}
	return sign + strconv.FormatUint(u/NanosPerUnit, 10) + "." + frac
}

// NanosOf converts an amount in units (5.00) to nanos, rounding to the
// nearest. It reports false for an amount that is not finite or does not
// fit.
func NanosOf(amount float64) (int64, bool) {
	n := math.Round(amount * NanosPerUnit)
	if math.IsNaN(n) || math.IsInf(n, 0) || math.Abs(n) >= math.MaxInt64/2 {
		return 0, false
	}
	return int64(n), true
}

// Costs is a sum of costs, one per currency, sorted by currency. A run on
// models priced in two currencies carries two; keel never converts.
type Costs []Cost

// Add returns the sum of c and o. Neither is changed.
func (c Costs) Add(o Costs) Costs {
	if len(o) == 0 {
		return c
	}
	out := slices.Clone(c)
	for _, x := range o {
		i, found := slices.BinarySearchFunc(out, x.Currency, func(a Cost, cur string) int { return strings.Compare(a.Currency, cur) })
		if !found {
			out = slices.Insert(out, i, x)
			continue
		}
		out[i].Nanos = addSaturating(out[i].Nanos, x.Nanos)
		if out[i].Prices != x.Prices {
			out[i].Prices = "mixed"
		}
	}
	return out
}

// In returns the amount of c in currency, in nanos.
func (c Costs) In(currency string) int64 {
	for _, x := range c {
		if x.Currency == currency {
			return x.Nanos
		}
	}
	return 0
}

// String formats c as "0.42 USD + 0.10 EUR", or "" when empty.
func (c Costs) String() string {
	parts := make([]string, len(c))
	for i, x := range c {
		parts[i] = x.String()
	}
	return strings.Join(parts, " + ")
}

// Price is what a model's tokens cost, per million, in one currency, and
// what the searches of its backend's hosted web search cost, per
// thousand.
type Price struct {
	Currency string `json:"currency"`
	// Input is the price of prompt tokens read at full price.
	Input float64 `json:"input"`
	// Output is the price of generated tokens, reasoning included.
	Output float64 `json:"output"`
	// CachedInput is the price of prompt tokens read from the provider's
	// cache. Zero: they cost Input.
	CachedInput float64 `json:"cached_input,omitempty"`
	// CacheWrite is the price of prompt tokens written to the cache.
	// Zero: they cost Input.
	CacheWrite float64 `json:"cache_write,omitempty"`
	// WebSearch is the price of 1,000 searches of the backend's hosted
	// web search (Usage.WebSearches), which backends bill per search on
	// top of the tokens. Zero: the table has no price for them, and they
	// add nothing to a cost.
	WebSearch float64 `json:"web_search,omitempty"`
	// Prices names the table this price came from (Cost.Prices).
	Prices string `json:"prices,omitempty"`
}

// Validate reports a price that cannot be used: no currency, or a
// negative or non-finite figure, or one over 1,000,000 (per million
// tokens, or per thousand searches).
func (p Price) Validate() error {
	if len(p.Currency) != 3 || strings.ToUpper(p.Currency) != p.Currency || strings.ContainsFunc(p.Currency, func(r rune) bool { return r < 'A' || r > 'Z' }) {
		return fmt.Errorf("currency must be a three-letter code such as USD")
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"input", p.Input}, {"output", p.Output}, {"cached_input", p.CachedInput}, {"cache_write", p.CacheWrite}} {
		if f.v < 0 || math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v > 1e6 {
			return fmt.Errorf("%s must be a price per million tokens from 0 to 1,000,000", f.name)
		}
	}
	if w := p.WebSearch; w < 0 || math.IsNaN(w) || math.IsInf(w, 0) || w > 1e6 {
		return fmt.Errorf("web_search must be a price per thousand searches from 0 to 1,000,000")
	}
	return nil
}

// Cost returns what usage u cost at p. u.InputTokens is the whole prompt,
// cache reads and writes included (as every provider of keel reports it):
// the part neither read from nor written to the cache is priced as input.
// Hosted web searches (u.WebSearches) add p.WebSearch per thousand.
func (p Price) Cost(u Usage) Cost {
	cached, write := p.CachedInput, p.CacheWrite
	if cached == 0 {
		cached = p.Input
	}
	if write == 0 {
		write = p.Input
	}
	u = u.Bounded()
	plain := max(u.InputTokens-u.CacheReadTokens-u.CacheWriteTokens, 0)
	n := addSaturating(addSaturating(perMillion(plain, p.Input), perMillion(u.CacheReadTokens, cached)),
		addSaturating(perMillion(u.CacheWriteTokens, write), perMillion(u.OutputTokens, p.Output)))
	n = addSaturating(n, perThousand(u.WebSearches, p.WebSearch))
	return Cost{Currency: p.Currency, Nanos: n, Prices: p.Prices}
}

// Estimate returns the most a request can cost at p: its prompt, of about
// promptTokens, all at full price, and maxOutput tokens of answer.
func (p Price) Estimate(promptTokens, maxOutput int64) int64 {
	return addSaturating(perMillion(promptTokens, max(p.Input, p.CacheWrite)), perMillion(maxOutput, p.Output))
}

// perMillion returns the cost in nanos of tokens at price per million.
func perMillion(tokens int64, price float64) int64 { return costOf(tokens, price, 1_000_000) }

// perThousand returns the cost in nanos of n uses at price per thousand.
func perThousand(n int64, price float64) int64 { return costOf(n, price, 1_000) }

// costOf returns the cost in nanos of n items at price per `per` items,
// rounded to the nearest nano, at most math.MaxInt64 (a float past it
// would convert to anything).
func costOf(n int64, price, per float64) int64 {
	if n <= 0 || !(price > 0) {
		return 0
	}
	c := math.Round(float64(n) * price * (NanosPerUnit / per))
	if c >= math.MaxInt64 || math.IsNaN(c) {
		return math.MaxInt64
	}
	return int64(c)
}

// addSaturating returns a+b, saturating at math.MaxInt64 and math.MinInt64
// instead of wrapping: a sum of costs that no longer fits stays the
// largest amount, never turns negative (docs/contract.md §20.6).
func addSaturating(a, b int64) int64 {
	s := a + b
	switch {
	case a > 0 && b > 0 && s < 0:
		return math.MaxInt64
	case a < 0 && b < 0 && s >= 0:
		return math.MinInt64
	}
	return s
}
