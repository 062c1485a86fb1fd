package keel_test

import (
	"math"
	"reflect"
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
	for _, bad := range []keel.Price{
		{Currency: "usd", Input: 1}, {Currency: "US", Input: 1}, {Currency: "U$D"},
		{Currency: "USD", Input: -1}, {Currency: "USD", Output: math.NaN()}, {Currency: "USD", CacheWrite: math.Inf(1)},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil", bad)
		}
	}
}
