package activities

import (
	"context"
	"sync"
	"testing"
	"time"
)

// fakeClock is a clock that moves only when told.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// docs/contract.md §20.5: requests that ask at once are paced to the
// configured rate. On a clock that stands still, each reservation's wait
// says when it may be sent; of 10, 100 or 500 asking at once, those sent
// within the first minute are the configured rate plus the one-second
// burst, as a ratio.
func TestRateLimiterHoldsTheConfiguredRate(t *testing.T) {
	for _, asks := range []int{10, 100, 500} {
		clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
		l := &rateLimiter{now: clock.now}
		rl := RateLimit{RequestsPerMinute: 120}
		n := 0
		var last time.Duration
		for range asks {
			if _, err := l.waitFor(context.Background(), "scripted", rl, 0, func(d time.Duration) { last = d }); err != nil {
				t.Fatal(err)
			}
			if last < time.Minute {
				n++
			}
		}
		want := min(asks, 120+1) // a minute's rate and the one-second burst's extra request
		if ratio := float64(n) / float64(want); ratio < 0.98 || ratio > 1.02 {
			t.Errorf("%d asking at once: %d sent in the first minute, %.3f× the expected %d", asks, n, ratio, want)
		}
		if asks == 500 && (last < 4*time.Minute || last > 4*time.Minute+10*time.Second) {
			t.Errorf("the 500th waits %v, want about 4m9s at 120/min", last)
		}
		t.Logf("%d asking at once: %d sent in the first minute at 120/min (%.3f× expected); the last waits %v", asks, n, float64(n)/float64(want), last)
	}
}

// A request that waits gives its place back when cancelled, and token
// reservations are settled to what the reply used.
func TestRateLimiterCancelAndSettle(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	l := &rateLimiter{now: clock.now}
	rl := RateLimit{RequestsPerMinute: 60, TokensPerMinute: 6000}
	// A minute's tokens at once; the next must wait for them to come back.
	first, err := l.waitFor(context.Background(), "k", rl, 6000, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var waited time.Duration
	if _, err := l.wait(ctx, "k", rl, 3000, func(d time.Duration) { waited = d }); err == nil {
		t.Fatal("a cancelled wait returned a ticket")
	}
	if waited < 20*time.Second {
		t.Errorf("the second request would wait %v, want about 30 s for 3,000 tokens", waited)
	}
	// The reply used a tenth of its estimate: the rest comes back, and
	// the cancelled request's reservation was given back too.
	first.settle(600)
	var again time.Duration
	if _, err := l.waitFor(context.Background(), "k", rl, 3000, func(d time.Duration) { again = d }); err != nil {
		t.Fatal(err)
	}
	if again > 2*time.Second {
		t.Errorf("after the settle and the cancel the next request waits %v, want about the request pace", again)
	}
}

// waitFor is wait without blocking: it reserves and reports the wait, for
// tests on a fake clock.
func (l *rateLimiter) waitFor(ctx context.Context, key string, rl RateLimit, tokens int64, onWait func(time.Duration)) (*ticket, error) {
	ctx, cancel := context.WithCancel(ctx)
	cancel()
	var waited time.Duration
	tk, err := l.wait(ctx, key, rl, tokens, func(d time.Duration) { waited = d })
	if onWait != nil {
		onWait(waited)
	}
	if err != nil {
		// Keep the reservation: the test's clock stands still, so the
		// request is taken as sent when its wait would end.
		l.mu.Lock()
		ps := l.paces[key]
		now := l.clock()
		if ps[0] != nil {
			ps[0].reserve(now, 1)
		}
		if ps[1] != nil {
			ps[1].reserve(now, tokens)
		}
		l.mu.Unlock()
		return &ticket{l: l, p: ps, tokens: tokens}, nil
	}
	return tk, nil
}
