package keel_test

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/keelrun/keel"
)

// A request's cost prices each kind of token at its own rate: the prompt
// tokens neither read from nor written to the cache at the input price,
// cache reads and writes at theirs, and the answer at the output price.
func TestPriceCost(t *testing.T) {
	p := keel.Price{Currency: "USD", Input: 3, Output: 15, CachedInput: 0.30, CacheWrite: 3.75, Prices: "keel.yaml"}
	u := keel.Usage{InputTokens: 100_000, CacheReadTokens: 80_000, CacheWriteTokens: 10_000, OutputTokens: 2_000}
	// 10,000 plain × 3 + 80,000 × 0.30 + 10,000 × 3.75 + 2,000 × 15, per million.
	want := int64(0.030e9 + 0.024e9 + 0.0375e9 + 0.030e9)
	if got := p.Cost(u); got != (keel.Cost{Currency: "USD", Nanos: want, Prices: "keel.yaml"}) {
		t.Fatalf("Cost = %+v, want %d nanos", got, want)
	}
	// Without cache prices, cached tokens cost the input price.
	flat := keel.Price{Currency: "EUR", Input: 1, Output: 2}
	if got := flat.Cost(u).Nanos; got != int64(0.100e9+0.004e9) {
		t.Errorf("flat Cost = %d", got)
	}
	// A report whose cached tokens exceed the prompt never goes negative.
	if got := flat.Cost(keel.Usage{InputTokens: 1, CacheReadTokens: 5}).Nanos; got != 5_000 {
		t.Errorf("odd report: %d nanos", got)
	}
	if got := p.Estimate(1_000_000, 1_000_000); got != int64(3.75e9+15e9) {
		t.Errorf("Estimate = %d", got)
	}
}

// Hosted web searches cost the price per thousand on top of the tokens,
// whatever model made them; a price without one leaves them out, and the
// estimate of a request's cost before it is sent stays the tokens'.
func TestPriceCostOfWebSearches(t *testing.T) {
	p := keel.Price{Currency: "USD", Input: 3, Output: 15, WebSearch: 10, Prices: "keel.yaml"}
	u := keel.Usage{InputTokens: 10_000, OutputTokens: 1_000, WebSearches: 3}
	// 10,000 × 3 + 1,000 × 15 per million, and 3 × 10 per thousand.
	want := int64(0.030e9 + 0.015e9 + 0.030e9)
	if got := p.Cost(u); got != (keel.Cost{Currency: "USD", Nanos: want, Prices: "keel.yaml"}) {
		t.Fatalf("Cost = %+v, want %d nanos", got, want)
	}
	if got := p.Cost(keel.Usage{WebSearches: 1}).Nanos; got != 10_000_000 {
		t.Errorf("one search alone = %d nanos, want 0.01 USD", got)
	}
	noSearchPrice := keel.Price{Currency: "USD", Input: 3, Output: 15}
	if got := noSearchPrice.Cost(u).Nanos; got != int64(0.045e9) {
		t.Errorf("without a search price = %d nanos, want the tokens' 0.045 USD", got)
	}
	if got, tokensOnly := p.Estimate(1_000, 100), noSearchPrice.Estimate(1_000, 100); got != tokensOnly {
		t.Errorf("Estimate with a search price = %d, without = %d", got, tokensOnly)
	}
	// The dearest search price keel takes, and the most searches a
	// request counts: the sum saturates, never wraps.
	top := keel.Price{Currency: "USD", WebSearch: 1e6}
	if err := top.Validate(); err != nil {
		t.Fatalf("the dearest search price: %v", err)
	}
	if got := top.Cost(keel.Usage{WebSearches: math.MaxInt64}).Nanos; got != math.MaxInt64 {
		t.Errorf("Cost(max searches) = %d, want it saturated at MaxInt64", got)
	}
	// Bounded like the tokens: a report past keel.MaxRequestTokens counts
	// as that many.
	if got := (keel.Price{Currency: "USD", WebSearch: 1}).Cost(keel.Usage{WebSearches: math.MaxInt64}).Nanos; got != int64(keel.MaxRequestTokens)*1e6 {
		t.Errorf("Cost(max searches at 1 per thousand) = %d, want %d", got, int64(keel.MaxRequestTokens)*1e6)
	}
	if got := (keel.Price{Currency: "USD", Input: 1e6, Output: 1e6, WebSearch: 1e6}).Cost(keel.Usage{
		InputTokens: math.MaxInt64, OutputTokens: math.MaxInt64, WebSearches: math.MaxInt64}).Nanos; got != math.MaxInt64 {
		t.Errorf("Cost(everything at the most) = %d, want it saturated at MaxInt64", got)
	}
	if got := top.Cost(keel.Usage{WebSearches: -4}).Nanos; got != 0 {
		t.Errorf("Cost(negative searches) = %d, want 0", got)
	}
}

// Costs sum per currency, stay sorted, never convert, and say when a sum
// drew on two price tables.
func TestCostsAdd(t *testing.T) {
	usd := keel.Costs{{Currency: "USD", Nanos: 1, Prices: "a"}}
	eur := keel.Costs{{Currency: "EUR", Nanos: 2, Prices: "a"}}
	got := usd.Add(eur).Add(keel.Costs{{Currency: "USD", Nanos: 3, Prices: "b"}})
	want := keel.Costs{{Currency: "EUR", Nanos: 2, Prices: "a"}, {Currency: "USD", Nanos: 4, Prices: "mixed"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if usd[0].Nanos != 1 {
		t.Errorf("Add changed its receiver: %+v", usd)
	}
	if got.In("USD") != 4 || got.In("GBP") != 0 {
		t.Errorf("In: %d %d", got.In("USD"), got.In("GBP"))
	}
	if s := got.String(); s != "0.000000002 EUR + 0.000000004 USD" {
		t.Errorf("String = %q", s)
	}
}

func TestFormatAndParseNanos(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{{0, "0.00"}, {5_000_000_000, "5.00"}, {123_450_000, "0.12345"}, {-1, "-0.000000001"}, {math.MaxInt64, "9223372036.854775807"}} {
		if got := keel.FormatNanos(c.n); got != c.want {
			t.Errorf("FormatNanos(%d) = %q, want %q", c.n, got, c.want)
		}
	}
	if n, ok := keel.NanosOf(0.5); !ok || n != 500_000_000 {
		t.Errorf("NanosOf(0.5) = %d, %v", n, ok)
	}
	for _, bad := range []float64{math.NaN(), math.Inf(1), 1e12} {
		if _, ok := keel.NanosOf(bad); ok {
			t.Errorf("NanosOf(%v) accepted", bad)
		}
	}
}

func TestPriceValidate(t *testing.T) {
	if err := (keel.Price{Currency: "USD", Input: 1, Output: 2}).Validate(); err != nil {
		t.Fatal(err)
	}
	if err := (keel.Price{Currency: "USD", Input: 1, Output: 2, WebSearch: 25}).Validate(); err != nil {
		t.Fatal(err)
	}
	if err := (keel.Price{Currency: "USD", WebSearch: -1}).Validate(); err == nil || !strings.Contains(err.Error(), "web_search") {
		t.Errorf("a negative search price: %v, want an error naming web_search", err)
	}
	for _, bad := range []keel.Price{
		{Currency: "usd", Input: 1}, {Currency: "US", Input: 1}, {Currency: "U$D"},
		{Currency: "USD", Input: -1}, {Currency: "USD", Output: math.NaN()}, {Currency: "USD", CacheWrite: math.Inf(1)},
		{Currency: "USD", WebSearch: -10}, {Currency: "USD", WebSearch: math.NaN()}, {Currency: "USD", WebSearch: math.Inf(1)},
		{Currency: "USD", WebSearch: 1e6 + 1},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil", bad)
		}
	}
}

// A provider's usage is a model's input (docs/contract.md §20.6): counts
// that are negative or too large for any model are bounded before they
// are priced, and no sum of costs or tokens wraps: it stays the largest
// amount, never turns negative.
func TestAbsurdUsageNeitherOverflowsNorGoesNegative(t *testing.T) {
	top := keel.Price{Currency: "USD", Input: 1e6, Output: 1e6, CachedInput: 1e6, CacheWrite: 1e6}
	if err := top.Validate(); err != nil {
		t.Fatalf("the dearest price keel takes: %v", err)
	}
	huge := keel.Usage{InputTokens: math.MaxInt64, OutputTokens: math.MaxInt64, CacheReadTokens: math.MaxInt64,
		CacheWriteTokens: math.MaxInt64, ReasoningTokens: math.MaxInt64}
	b := huge.Bounded()
	if b.InputTokens != keel.MaxRequestTokens || b.OutputTokens != keel.MaxRequestTokens ||
		b.CacheReadTokens != keel.MaxRequestTokens || b.CacheWriteTokens != keel.MaxRequestTokens || b.ReasoningTokens != keel.MaxRequestTokens {
		t.Fatalf("Bounded(huge) = %+v", b)
	}
	// Every kind at the bound and the dearest price: cache reads, writes
	// and answer (the plain prompt is what is left of the input: none).
	want := 3 * int64(keel.MaxRequestTokens) * 1e9
	if got := top.Cost(huge).Nanos; got != want {
		t.Errorf("Cost(huge) = %d, want %d", got, want)
	}
	neg := keel.Usage{InputTokens: -5e18, OutputTokens: -1, CacheReadTokens: math.MinInt64, CacheWriteTokens: -3}
	if got := neg.Bounded(); !got.IsZero() {
		t.Errorf("Bounded(negative) = %+v, want zeros", got)
	}
	if got := top.Cost(neg).Nanos; got != 0 {
		t.Errorf("Cost(negative) = %d, want 0", got)
	}
	if got := top.Estimate(math.MaxInt64, math.MaxInt64); got != math.MaxInt64 {
		t.Errorf("Estimate(max, max) = %d, want it saturated at MaxInt64", got)
	}

	// Sums saturate in both directions instead of wrapping.
	c := keel.Costs{{Currency: "USD", Nanos: math.MaxInt64 - 1}}
	for range 3 {
		c = c.Add(keel.Costs{{Currency: "USD", Nanos: want}})
	}
	if c.In("USD") != math.MaxInt64 {
		t.Errorf("Costs.Add past MaxInt64 = %d", c.In("USD"))
	}
	low := keel.Costs{{Currency: "USD", Nanos: math.MinInt64 + 1}}.Add(keel.Costs{{Currency: "USD", Nanos: -5}})
	if low.In("USD") != math.MinInt64 {
		t.Errorf("Costs.Add past MinInt64 = %d", low.In("USD"))
	}
	u := huge
	for range 3 {
		u = u.Add(huge)
	}
	if u.InputTokens != math.MaxInt64 || u.Tokens() != math.MaxInt64 {
		t.Errorf("Usage.Add past MaxInt64: %d input, %d tokens", u.InputTokens, u.Tokens())
	}
}
