package workflows

import (
	"time"

	"github.com/keelrun/keel/internal/ratelimit"
)

// ratePace is a limit's pace (docs/contract.md §20.5): a generic cell
// rate algorithm for requests and one for tokens over ratelimit.RateLimitState.
// It does no I/O and reads no clock: every call is given the time, so the
// RateLimit workflow runs it on workflow time and replays it exactly.
type ratePace struct{ st *ratelimit.RateLimitState }

// unitsCost is how much pace time n units take at perMinute: n minutes
// divided by the rate, in integer nanoseconds (n ≤ MaxRateTokens keeps
// the product within int64).
func unitsCost(n int64, perMinute int) time.Duration {
	return time.Duration(n * int64(time.Minute) / int64(perMinute))
}

// requestBurst is how far ahead of now the requests' pace may run before
// a request waits: a second's worth of requests, at least one.
func requestBurst(rpm int) time.Duration {
	return max(unitsCost(1, rpm), time.Second)
}

// tokenBurst is the tokens' equivalent: a minute's worth, as providers
// count them, so one large request is not held back on an idle limit.
const tokenBurst = time.Minute

// take moves a pace's arrival time by cost from now (or from where it
// is, if later) and returns how long a request must wait for it.
func take(tat *time.Time, now time.Time, cost, burst time.Duration) time.Duration {
	if tat.Before(now) {
		*tat = now
	}
	*tat = tat.Add(cost)
	return max(tat.Sub(now)-burst, 0)
}

// giveBack moves a pace's arrival time back by cost, never before now.
func giveBack(tat *time.Time, now time.Time, cost time.Duration) {
	*tat = tat.Add(-cost)
	if tat.Before(now) {
		*tat = now
	}
}

// reserve takes one request and r's tokens under limit and returns how
// long the request waits. A reservation already held is answered again
// from what it holds.
func (p ratePace) reserve(now time.Time, limit ratelimit.RateLimit, r ratelimit.RateReservation) time.Duration {
	if h, ok := p.st.Held[r.ID]; ok {
		return max(h.At.Sub(now), 0)
	}
	var wait time.Duration
	h := ratelimit.RateHeld{}
	if limit.RequestsPerMinute > 0 {
		h.Request = unitsCost(1, limit.RequestsPerMinute)
		wait = take(&p.st.Requests, now, h.Request, requestBurst(limit.RequestsPerMinute))
	}
	if limit.TokensPerMinute > 0 && r.Tokens > 0 {
		h.Tokens, h.TokensPerMinute = r.Tokens, limit.TokensPerMinute
		wait = max(wait, take(&p.st.Tokens, now, unitsCost(r.Tokens, limit.TokensPerMinute), tokenBurst))
	}
	h.At = now.Add(wait)
	h.Until = h.At.Add(ratelimit.RateGrace)
	if h.Tokens > 0 {
		h.Until = h.At.Add(ratelimit.RateHoldFor)
	}
	if len(p.st.Held) < ratelimit.MaxRateHeld {
		if p.st.Held == nil {
			p.st.Held = map[string]ratelimit.RateHeld{}
		}
		p.st.Held[r.ID] = h
	}
	return wait
}

// giveBack returns a held reservation: all of it if its request was not
// sent, else the tokens it did not use (or takes those it used beyond
// them). It then forgets the reservation. An ID it does not hold changes
// nothing.
func (p ratePace) giveBack(now time.Time, g ratelimit.RateGiveBack) {
	h, ok := p.st.Held[g.ID]
	if !ok {
		return
	}
	delete(p.st.Held, g.ID)
	if !g.Sent {
		if h.Request > 0 {
			giveBack(&p.st.Requests, now, h.Request)
		}
		if h.Tokens > 0 {
			giveBack(&p.st.Tokens, now, unitsCost(h.Tokens, h.TokensPerMinute))
		}
		return
	}
	switch {
	case h.Tokens == 0:
	case g.Used < h.Tokens:
		giveBack(&p.st.Tokens, now, unitsCost(h.Tokens-g.Used, h.TokensPerMinute))
	case g.Used > h.Tokens:
		take(&p.st.Tokens, now, unitsCost(g.Used-h.Tokens, h.TokensPerMinute), tokenBurst)
	}
}

// expire forgets the reservations that can no longer be given back.
func (p ratePace) expire(now time.Time) {
	for id, h := range p.st.Held {
		if h.Until.Before(now) {
			delete(p.st.Held, id)
		}
	}
}
