package main

import (
	"reflect"
	"testing"

	"github.com/keelrun/keel/api"
)

func TestParseBudget(t *testing.T) {
	for in, want := range map[string]api.Budget{
		"0.50":         {Max: 0.5, Currency: "USD"},
		"0.50 EUR":     {Max: 0.5, Currency: "EUR"},
		"2eur":         {Max: 2, Currency: "EUR"},
		"20000 tokens": {MaxTokens: 20000},
		"  7tokens ":   {MaxTokens: 7},
	} {
		got, err := parseBudget(in)
		if err != nil || !reflect.DeepEqual(*got, want) {
			t.Errorf("parseBudget(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0", "-1", "abc", "1 EURO", "1.5 tokens", "0 tokens", "NaN", "1e300", "1 US$"} {
		if b, err := parseBudget(bad); err == nil {
			t.Errorf("parseBudget(%q) = %+v, want an error", bad, b)
		}
	}
}
