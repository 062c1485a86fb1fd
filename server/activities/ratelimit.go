package activities

import (
	"context"
	"errors"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/internal/ratelimit"
)

// RateLimit bounds a provider's (or one model's) requests and tokens per
// minute (keel.yaml limits.rate; docs/contract.md §20.5). Zero fields do
// not limit.
type RateLimit = ratelimit.RateLimit

// RateGate paces model requests under limits that every worker shares
// (docs/contract.md §20.5): worker.NewActivities gives one that asks the
// limit's RateLimit workflow through Temporal.
type RateGate interface {
	// Reserve takes one request and tokens under the limit named key and
	// says how long the request must wait before it is sent. It keeps
	// trying while ctx lives when the limit cannot be reached; a
	// reservation it makes after ctx ended is given back.
	Reserve(ctx context.Context, key string, limit RateLimit, tokens int64) (RateTicket, error)
	// GiveBack returns a reservation: all of it when its request was not
	// sent, else its tokens beyond used (or takes those used beyond
	// them). It does not wait for the limit.
	GiveBack(key string, t RateTicket, sent bool, used int64)
}

// RateTicket is a reservation: its ID, the tokens it took, and how long
// its request waits from the moment Reserve returned.
type RateTicket struct {
	ID     string
	Tokens int64
	Wait   time.Duration
}

// LocalRateWait is the longest wait for a rate limit a model turn spends
// in its activity, heartbeating (a heartbeat every HeartbeatEvery, each a
// write on the server). A longer one is handed to the run, which waits
// with a durable timer: no heartbeats, however long the wait and however
// many runs wait (docs/contract.md §20.5).
const LocalRateWait = 10 * time.Second

// errNoRateGate is a turn's failure on a worker with rate limits and no
// RateGate to keep them.
var errNoRateGate = errors.New("activities: Policy.RateLimits need a RateGate (worker.NewActivities gives one)")

// rateKey picks the limit a request of spec (as the run named it) to
// model of provider is held to: the spec's own, then "provider:model",
// then the provider's.
func (p *Policy) rateKey(spec, providerName, model string) (string, RateLimit, bool) {
	for _, k := range []string{spec, providerName + ":" + model, providerName} {
		if rl, ok := p.RateLimits[k]; ok && rl.Limits() {
			return k, rl, true
		}
	}
	return "", RateLimit{}, false
}

// rateHold is a model request's place under its rate limit, to settle
// once the request is done. Its zero value (no limit) settles nothing.
type rateHold struct {
	gate   RateGate
	key    string
	ticket RateTicket
}

// waitTurn reserves a request of tokens under key's limit and waits for
// its turn, heartbeating (begin's heartbeater runs meanwhile), after
// publishing model.waiting when it must wait. Cancelled while it waits,
// it gives the reservation back and returns ctx's error. A wait longer
// than LocalRateWait is not waited here: it comes back as a RateHold for
// the run's timer. A turn whose run waited already (in.Rate) sends at
// once.
func (a *Activities) waitTurn(ctx context.Context, in ModelTurnInput, key string, rl RateLimit, tokens int64) (rateHold, *RateHold, error) {
	if r := in.Rate; r != nil {
		if a.Rates == nil {
			return rateHold{}, nil, nil // this worker keeps no limit: nothing to settle
		}
		return rateHold{gate: a.Rates, key: r.Key, ticket: RateTicket{ID: r.ID, Tokens: r.Tokens}}, nil, nil
	}
	if a.Rates == nil {
		return rateHold{}, nil, errNoRateGate
	}
	t, err := a.Rates.Reserve(ctx, key, rl, tokens)
	if err != nil {
		return rateHold{}, nil, err
	}
	h := rateHold{gate: a.Rates, key: key, ticket: t}
	if t.Wait <= 0 {
		return h, nil, nil
	}
	a.publish(ctx, in.SessionID, in.RunID, in.AfterSeq, keel.ModelWaiting{Step: in.Step, Attempt: in.Attempt,
		Limit: key, Wait: keel.Duration(t.Wait)})
	if t.Wait > LocalRateWait {
		return rateHold{}, &RateHold{Key: key, ID: t.ID, Tokens: t.Tokens, Wait: keel.Duration(t.Wait)}, nil
	}
	timer := time.NewTimer(t.Wait)
	defer timer.Stop()
	select {
	case <-timer.C:
		return h, nil, nil
	case <-ctx.Done():
		a.Rates.GiveBack(key, t, false, 0)
		return rateHold{}, nil, ctx.Err()
	}
}

// RateGiveBack gives back the place a run held under a rate limit and no
// longer needs: it was cancelled while its timer waited (docs/contract.md
// §20.5). It runs as a local activity and does not wait for the limit.
func (a *Activities) RateGiveBack(ctx context.Context, h RateHold) error {
	if a.Rates != nil && h.ID != "" {
		a.Rates.GiveBack(h.Key, RateTicket{ID: h.ID, Tokens: h.Tokens}, false, 0)
	}
	return nil
}

// giveBack returns the reservation of a request that was never sent.
func (h rateHold) giveBack() {
	if h.gate != nil {
		h.gate.GiveBack(h.key, h.ticket, false, 0)
	}
}

// settle tells the limit what the request used, once it was sent.
func (h rateHold) settle(used int64) {
	if h.gate != nil {
		h.gate.GiveBack(h.key, h.ticket, true, used)
	}
}
