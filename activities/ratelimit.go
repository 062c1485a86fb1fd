package activities

import (
	"context"
	"sync"
	"time"
)

// RateLimit bounds a provider's (or one model's) requests and tokens per
// minute on this worker (keel.yaml limits.rate; docs/contract.md §20.5).
// Zero fields do not limit.
type RateLimit struct {
	RequestsPerMinute int `json:"requests_per_minute,omitempty"`
	TokensPerMinute   int `json:"tokens_per_minute,omitempty"`
}

// pace is one budget of a rate limit, spent at a steady pace: a
// generic cell rate algorithm. next is when the budget is back to full;
// a reservation of n units moves it on by n×interval, and waits for the
// part of that beyond burst×interval from now.
type pace struct {
	interval time.Duration // the time one unit takes to come back
	burst    time.Duration // how much may be spent at once, as time
	next     time.Time
}

func newPace(perMinute int, burst float64) *pace {
	iv := time.Minute / time.Duration(perMinute)
	return &pace{interval: iv, burst: time.Duration(burst * float64(iv))}
}

// reserve takes n units and returns how long to wait before using them.
func (p *pace) reserve(now time.Time, n int64) time.Duration {
	if p.next.Before(now) {
		p.next = now
	}
	p.next = p.next.Add(time.Duration(n) * p.interval)
	return max(p.next.Sub(now)-p.burst, 0)
}

// give returns n units reserved but not used (a request cancelled while
// it waited, or a reply smaller than its estimate).
func (p *pace) give(now time.Time, n int64) {
	p.next = p.next.Add(-time.Duration(n) * p.interval)
	if p.next.Before(now) {
		p.next = now
	}
}

// rateLimiter holds the paces of Policy.RateLimits, by key.
type rateLimiter struct {
	mu    sync.Mutex
	paces map[string]*[2]*pace // requests, tokens
	now   func() time.Time
}

// ticket is a request's place in its limits: what it reserved, to settle
// once its real size is known.
type ticket struct {
	l      *rateLimiter
	p      *[2]*pace
	tokens int64
}

// rateKey picks the limit a request of spec (as the run named it) to
// model of provider is held to: the spec's own, then "provider:model",
// then the provider's.
func (p *Policy) rateKey(spec, providerName, model string) (string, RateLimit, bool) {
	for _, k := range []string{spec, providerName + ":" + model, providerName} {
		if rl, ok := p.RateLimits[k]; ok && (rl.RequestsPerMinute > 0 || rl.TokensPerMinute > 0) {
			return k, rl, true
		}
	}
	return "", RateLimit{}, false
}

// wait reserves one request and tokens under key's limit rl, and blocks
// until they may be used, calling onWait first when it must wait. It
// returns early with ctx's error when ctx ends, giving the reservation
// back.
func (l *rateLimiter) wait(ctx context.Context, key string, rl RateLimit, tokens int64, onWait func(time.Duration)) (*ticket, error) {
	l.mu.Lock()
	now := l.clock()
	if l.paces == nil {
		l.paces = map[string]*[2]*pace{}
	}
	ps, ok := l.paces[key]
	if !ok {
		ps = &[2]*pace{}
		// Requests burst one second's worth (at least one), so 500 runs
		// that start at once spread out instead of landing together;
		// tokens a minute's worth, as providers count them, so one large
		// request is not held back on an idle limit.
		if rl.RequestsPerMinute > 0 {
			ps[0] = newPace(rl.RequestsPerMinute, max(1, float64(rl.RequestsPerMinute)/60))
		}
		if rl.TokensPerMinute > 0 {
			ps[1] = newPace(rl.TokensPerMinute, float64(rl.TokensPerMinute))
		}
		l.paces[key] = ps
	}
	var d time.Duration
	if ps[0] != nil {
		d = max(d, ps[0].reserve(now, 1))
	}
	if ps[1] != nil {
		d = max(d, ps[1].reserve(now, tokens))
	}
	l.mu.Unlock()
	t := &ticket{l: l, p: ps, tokens: tokens}
	if d <= 0 {
		return t, nil
	}
	if onWait != nil {
		onWait(d)
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return t, nil
	case <-ctx.Done():
		t.cancel()
		return nil, ctx.Err()
	}
}

func (l *rateLimiter) clock() time.Time {
	if l.now != nil {
		return l.now()
	}
	return time.Now()
}

// cancel gives back a ticket that was never used.
func (t *ticket) cancel() {
	t.l.mu.Lock()
	defer t.l.mu.Unlock()
	now := t.l.clock()
	if t.p[0] != nil {
		t.p[0].give(now, 1)
	}
	if t.p[1] != nil {
		t.p[1].give(now, t.tokens)
	}
}

// settle corrects the tokens reserved to what the request used: a
// smaller reply gives the difference back, a larger one takes more.
func (t *ticket) settle(used int64) {
	if t == nil || t.p[1] == nil || used == t.tokens {
		return
	}
	t.l.mu.Lock()
	defer t.l.mu.Unlock()
	now := t.l.clock()
	if used < t.tokens {
		t.p[1].give(now, t.tokens-used)
	} else {
		t.p[1].reserve(now, used-t.tokens)
	}
}
