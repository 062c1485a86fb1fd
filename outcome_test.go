package keel_test

import (
	"testing"

	"github.com/keelrun/keel"
)

func TestUsageAdd(t *testing.T) {
	a := keel.Usage{InputTokens: 1, OutputTokens: 2, CacheReadTokens: 3, CacheWriteTokens: 4, ReasoningTokens: 5, Requests: 1}
	if got := a.Add(a); got != (keel.Usage{InputTokens: 2, OutputTokens: 4, CacheReadTokens: 6, CacheWriteTokens: 8, ReasoningTokens: 10, Requests: 2}) {
		t.Errorf("got %+v", got)
	}
}
