package anthropic

import (
	"testing"

	"github.com/keelrun/keel"
)

// sonnetPrice is claude-sonnet-4-5 as keel's default table lists it
// (server/config/prices.yaml): USD per million tokens, 3.00 in, 0.30 read from
// the cache, 3.75 written to it, 15.00 out.
var sonnetPrice = keel.Price{Currency: "USD", Input: 3, Output: 15, CachedInput: 0.30, CacheWrite: 3.75}

// The 20-request session of TestCacheTwentyTurnSession, priced by the
// table (docs/contract.md §20.1, issue 25 part 4): the cost of what the
// provider reported, request by request, adds up to the cost of the
// session's total usage, with caching and without; caching makes it about
// a fifth. Each figure is exact: at these prices every token costs a whole
// number of nanos.
func TestCacheTwentyTurnSessionCost(t *testing.T) {
	for _, c := range []struct {
		name  string
		cfg   Config
		nanos int64
	}{
		// 94,151 read × 0.30 + 7,285 written × 3.75 + 632 out × 15.
		{"with caching", Config{}, 94151*300 + 7285*3750 + 632*15000},
		// 101,436 in × 3.00 + 632 out × 15.
		{"without caching", Config{DisableCache: true}, 101436*3000 + 632*15000},
	} {
		t.Run(c.name, func(t *testing.T) {
			total, turns := agentSession(t, c.cfg)
			var sum int64
			for _, turn := range turns {
				// What the provider reported for a request, as keel
				// records it: the whole prompt as input.
				u := keel.Usage{InputTokens: turn.input + turn.read + turn.write, CacheReadTokens: turn.read,
					CacheWriteTokens: turn.write, OutputTokens: turn.output}
				sum += sonnetPrice.Cost(u).Nanos
			}
			if got := sonnetPrice.Cost(total).Nanos; got != c.nanos || sum != c.nanos {
				t.Errorf("cost of the total %d nanos, sum of the requests' %d, want %d", got, sum, c.nanos)
			}
			t.Logf("20 requests %s: %s USD", c.name, keel.FormatNanos(c.nanos))
		})
	}
}
