package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/ratelimit"
	"github.com/keelrun/keel/server/activities"
)

// rateGate keeps the worker's rate limits with every other worker's: it
// asks each limit's RateLimit workflow (docs/contract.md §20.5) with the
// rate update, sent with update-with-start so the first asker creates it.
//
// Reservations of a limit that ask while its update is in flight wait for
// the next one, which carries them all and every give-back queued
// meanwhile. So a limit takes at most one update at a time from each
// worker however many runs wait on it (Temporal admits 10 updates in
// flight per workflow by default), and a quiet limit costs one round trip
// a request.
type rateGate struct {
	c         client.Client
	taskQueue string
	log       *zap.Logger
	// ctx ends when the worker stops; wg counts the goroutines that send.
	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup

	mu    sync.Mutex
	lines map[string]*rateLine
}

var _ activities.RateGate = (*rateGate)(nil)

// rateLine is what waits to be sent to one limit.
type rateLine struct {
	key   string
	limit ratelimit.RateLimit // the latest asker's
	asks  []*rateAsk
	backs []ratelimit.RateGiveBack
	busy  bool // a goroutine is sending
}

// rateAsk is one reservation waiting for its answer.
type rateAsk struct {
	id     string
	tokens int64
	done   chan struct{} // closed once wait or err is set
	wait   time.Duration
	err    error
	gone   bool // its asker stopped waiting (under rateGate.mu)
}

// Timings of the gate's calls: each attempt of an update has
// rateCallTimeout; a failed one is tried again after a backoff from
// rateRetryFirst, doubling up to rateRetryMax.
const (
	rateCallTimeout = 30 * time.Second
	rateRetryFirst  = 50 * time.Millisecond
	rateRetryMax    = 5 * time.Second
)

func newRateGate(c client.Client, taskQueue string, log *zap.Logger) *rateGate {
	ctx, stop := context.WithCancel(context.Background())
	return &rateGate{c: c, taskQueue: taskQueue, log: log, ctx: ctx, stop: stop, lines: map[string]*rateLine{}}
}

// close stops sending and waits for the goroutines that send; reservations
// still waiting fail with the gate's context.
func (g *rateGate) close() {
	g.stop()
	g.wg.Wait()
}

// Reserve implements activities.RateGate.
func (g *rateGate) Reserve(ctx context.Context, key string, limit activities.RateLimit, tokens int64) (activities.RateTicket, error) {
	if err := ratelimit.ValidateRateKey(key); err != nil {
		return activities.RateTicket{}, err
	}
	ask := &rateAsk{id: newRateID(), tokens: min(max(tokens, 0), ratelimit.MaxRateTokens), done: make(chan struct{})}
	g.mu.Lock()
	l := g.line(key)
	l.limit = limit
	l.asks = append(l.asks, ask)
	g.kick(l)
	g.mu.Unlock()
	select {
	case <-ask.done:
		if ask.err != nil {
			return activities.RateTicket{}, ask.err
		}
		return activities.RateTicket{ID: ask.id, Tokens: ask.tokens, Wait: ask.wait}, nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-ask.done:
		// Answered as the asker left: what it took goes back.
		if ask.err == nil {
			g.queueBack(l, ratelimit.RateGiveBack{ID: ask.id})
		}
	default:
		ask.gone = true
	}
	return activities.RateTicket{}, ctx.Err()
}

// GiveBack implements activities.RateGate. A request that was sent and
// reserved no tokens has nothing to settle.
func (g *rateGate) GiveBack(key string, t activities.RateTicket, sent bool, used int64) {
	if t.ID == "" || len(t.ID) > ratelimit.MaxRateIDBytes || sent && t.Tokens == 0 || ratelimit.ValidateRateKey(key) != nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.queueBack(g.line(key), ratelimit.RateGiveBack{ID: t.ID, Sent: sent, Used: min(max(used, 0), ratelimit.MaxRateTokens)})
}

// line returns key's line. g.mu is held.
func (g *rateGate) line(key string) *rateLine {
	l := g.lines[key]
	if l == nil {
		l = &rateLine{key: key}
		g.lines[key] = l
	}
	return l
}

// queueBack queues a give-back, dropping the oldest past ratelimit.MaxRateHeld
// (the limit holds no more): a give-back lost errs towards fewer
// requests. g.mu is held.
func (g *rateGate) queueBack(l *rateLine, b ratelimit.RateGiveBack) {
	l.backs = append(l.backs, b)
	if n := len(l.backs) - ratelimit.MaxRateHeld; n > 0 {
		l.backs = append(l.backs[:0], l.backs[n:]...)
	}
	g.kick(l)
}

// kick starts sending l's queue unless it is being sent. g.mu is held.
func (g *rateGate) kick(l *rateLine) {
	if l.busy || len(l.asks) == 0 && len(l.backs) == 0 || g.ctx.Err() != nil {
		return
	}
	l.busy = true
	g.wg.Add(1)
	go g.send(l)
}

// send sends l's queue, one update at a time, until it is empty.
func (g *rateGate) send(l *rateLine) {
	defer g.wg.Done()
	for {
		g.mu.Lock()
		var asks []*rateAsk
		rest := l.asks[:0]
		for _, a := range l.asks {
			switch {
			case a.gone:
				close(a.done) // never sent: nothing to give back
			case len(asks) < ratelimit.MaxRateBatch:
				asks = append(asks, a)
			default:
				rest = append(rest, a)
			}
		}
		l.asks = rest
		n := min(len(l.backs), ratelimit.MaxRateBatch)
		backs := append([]ratelimit.RateGiveBack(nil), l.backs[:n]...)
		l.backs = append(l.backs[:0], l.backs[n:]...)
		if len(asks) == 0 && len(backs) == 0 {
			l.busy = false
			g.mu.Unlock()
			return
		}
		req := ratelimit.RateRequest{Limit: l.limit, GiveBack: backs}
		for _, a := range asks {
			req.Reserve = append(req.Reserve, ratelimit.RateReservation{ID: a.id, Tokens: a.tokens})
		}
		g.mu.Unlock()

		grant, err := g.ask(l.key, req, asks)
		g.mu.Lock()
		for i, a := range asks {
			if err != nil {
				a.err = err
			} else {
				a.wait = grant.Waits[i].Std()
				if a.gone {
					l.backs = append(l.backs, ratelimit.RateGiveBack{ID: a.id})
				}
			}
			close(a.done)
		}
		g.mu.Unlock()
	}
}

// errRateGone ends a round whose askers all left before the limit
// answered, with nothing to give back.
var errRateGone = errors.New("worker: rate limit: no one waits for this reservation")

// ask sends one update to key's limit, and again after a backoff while
// it fails (the limit unreachable, the server busy, the limit continuing
// as new), as long as the worker runs and someone waits for it. The
// update keeps its ID across attempts, so an attempt whose answer was
// lost is answered again rather than reserved twice. A refusal is final.
func (g *rateGate) ask(key string, req ratelimit.RateRequest, asks []*rateAsk) (ratelimit.RateGrant, error) {
	id := newRateID()
	backoff := rateRetryFirst
	for failures := 0; ; failures++ {
		grant, err := g.update(key, id, req)
		if err == nil {
			if len(grant.Waits) != len(req.Reserve) {
				return grant, fmt.Errorf("worker: rate limit %s answered %d waits for %d reservations", key, len(grant.Waits), len(req.Reserve))
			}
			if failures > 0 {
				g.log.Info("rate limit reached again", zap.String("limit", key), zap.Int("failures", failures))
			}
			return grant, nil
		}
		var refused *temporal.ApplicationError
		if errors.As(err, &refused) && refused.Type() == string(keel.CodeInvalidInput) {
			return grant, err
		}
		if g.ctx.Err() != nil {
			return grant, g.ctx.Err()
		}
		if len(req.GiveBack) == 0 && g.allGone(asks) {
			return grant, errRateGone
		}
		if failures == 0 {
			g.log.Warn("rate limit unreachable; trying again while its requests wait", zap.String("limit", key), zap.Error(err))
		}
		select {
		case <-time.After(backoff):
		case <-g.ctx.Done():
			return grant, g.ctx.Err()
		}
		backoff = min(2*backoff, rateRetryMax)
	}
}

func (g *rateGate) allGone(asks []*rateAsk) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, a := range asks {
		if !a.gone {
			return false
		}
	}
	return true
}

// update is one attempt of the rate update on key's limit, starting it
// if it does not run. Its tasks go ahead of runs' (api.SessionPriority):
// a limit that waits behind the runs it paces would pace nothing.
func (g *rateGate) update(key, id string, req ratelimit.RateRequest) (ratelimit.RateGrant, error) {
	ctx, cancel := context.WithTimeout(g.ctx, rateCallTimeout)
	defer cancel()
	start := g.c.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID:                       ratelimit.RateLimitWorkflowID(key),
		TaskQueue:                g.taskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		StaticSummary:            "keel rate limit " + key,
		Priority:                 temporal.Priority{PriorityKey: api.SessionPriority},
	}, ratelimit.RateLimitWorkflowName, ratelimit.RateLimitInput{Key: key})
	var grant ratelimit.RateGrant
	h, err := g.c.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{UpdateID: id, UpdateName: ratelimit.UpdateRate, Args: []any{req},
			WaitForStage: client.WorkflowUpdateStageCompleted},
	})
	if err != nil {
		return grant, err
	}
	return grant, h.Get(ctx, &grant)
}

// newRateID is a reservation's or an update's ID: 16 random bytes in hex.
func newRateID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
