package keel_test

import (
	"reflect"
	"testing"

	"github.com/keelrun/keel"
)

func TestUsageAdd(t *testing.T) {
	a := keel.Usage{InputTokens: 1, OutputTokens: 2, CacheReadTokens: 3, CacheWriteTokens: 4, ReasoningTokens: 5, Requests: 1}
	a.Cost = keel.Costs{{Currency: "USD", Nanos: 7, Prices: "t"}}
	a.Unpriced = 1
	want := keel.Usage{InputTokens: 2, OutputTokens: 4, CacheReadTokens: 6, CacheWriteTokens: 8, ReasoningTokens: 10, Requests: 2,
		Cost: keel.Costs{{Currency: "USD", Nanos: 14, Prices: "t"}}, Unpriced: 2}
	if got := a.Add(a); !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v", got)
	}
}
