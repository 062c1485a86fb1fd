package bench

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"sync"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/provider"
	"github.com/keelrun/keel/server/provider/scripted"
)

// RequestLog records when each model request of a rate-limit measurement
// was sent and by which worker: a limit shared by several workers is
// measured where the provider would see it.
type RequestLog struct {
	mu   sync.Mutex
	sent map[string][]time.Time // by model spec
	by   map[string]map[int]int // by model spec, then worker
}

// NewRequestLog returns an empty log.
func NewRequestLog() *RequestLog {
	return &RequestLog{sent: map[string][]time.Time{}, by: map[string]map[int]int{}}
}

// Models returns worker's model resolver: every spec resolves to a model
// that answers "done" at once, and each request is logged under its spec.
func (l *RequestLog) Models(worker int) activities.ModelResolver {
	return loggingModels{l: l, worker: worker, play: scripted.New(&scripted.Script{Name: "bench",
		Turns: []scripted.Turn{{Text: []string{"done"}}}, Repeat: true})}
}

// Sent returns the times spec's requests were sent, in order, and how
// many each worker sent.
func (l *RequestLog) Sent(spec string) ([]time.Time, map[int]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ts := slices.Clone(l.sent[spec])
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	by := map[int]int{}
	for w, n := range l.by[spec] {
		by[w] = n
	}
	return ts, by
}

type loggingModels struct {
	l      *RequestLog
	worker int
	play   *scripted.Provider
}

func (m loggingModels) Resolve(spec string) (provider.Provider, string, error) {
	return loggingProvider{m: m, spec: spec}, "bench", nil
}

type loggingProvider struct {
	m    loggingModels
	spec string
}

func (p loggingProvider) Name() string { return "bench" }

func (p loggingProvider) Stream(ctx context.Context, req provider.Request) iter.Seq2[provider.Chunk, error] {
	l := p.m.l
	l.mu.Lock()
	l.sent[p.spec] = append(l.sent[p.spec], time.Now())
	if l.by[p.spec] == nil {
		l.by[p.spec] = map[int]int{}
	}
	l.by[p.spec][p.m.worker]++
	l.mu.Unlock()
	return p.m.play.Stream(ctx, req)
}

// RateAccuracy is how closely requests kept a limit.
type RateAccuracy struct {
	Requests int
	// Burst is the limit's burst: requests that may go at once.
	Burst int
	// Span is from the first request to the last.
	Span time.Duration
	// Sustained is the rate of the requests beyond the burst over Span,
	// as a ratio to the limit: 1 holds it exactly, below 1 is slower.
	Sustained float64
	// Peak is the most requests sent in any Window, as a ratio to what
	// the limit allows in one (the burst and Window's worth).
	Peak   float64
	Window time.Duration
}

func (a RateAccuracy) String() string {
	return fmt.Sprintf("%d requests over %v: sustained %.3fx the limit, peak %.3fx in %v", a.Requests,
		a.Span.Round(time.Millisecond), a.Sustained, a.Peak, a.Window)
}

// MeasureRateAccuracy judges sent (request times, sorted) against a limit
// of perMinute requests a minute with its burst of a second's worth (at
// least one; docs/contract.md §20.5), the peak over windows of window.
func MeasureRateAccuracy(sent []time.Time, perMinute int, window time.Duration) RateAccuracy {
	burst := max(1, perMinute/60)
	a := RateAccuracy{Requests: len(sent), Burst: burst, Window: window}
	if len(sent) < 2 {
		return a
	}
	a.Span = sent[len(sent)-1].Sub(sent[0])
	perSecond := float64(perMinute) / 60
	if beyond := len(sent) - burst; beyond > 0 && a.Span > 0 {
		a.Sustained = float64(beyond) / a.Span.Seconds() / perSecond
	}
	most, j := 0, 0
	for i := range sent {
		for sent[i].Sub(sent[j]) >= window {
			j++
		}
		most = max(most, i-j+1)
	}
	a.Peak = float64(most) / (float64(burst) + perSecond*window.Seconds())
	return a
}

// SendAtOnce sends runs prompts at once, each the first run of its own
// session on model, and waits for them all to end. It returns how many
// did not complete, and the first such run's error.
func SendAtOnce(ctx context.Context, c *client.Client, prefix, model string, runs int) (int, error) {
	var wg sync.WaitGroup
	errs := make(chan error, runs)
	for i := range runs {
		wg.Go(func() {
			run, err := c.Session(fmt.Sprintf("%s-%d", prefix, i)).Send(ctx, "go", client.WithConfig(api.RunConfig{Model: model, Tools: []string{}}))
			if err == nil {
				var out keel.Outcome
				if out, err = run.Outcome(ctx); err == nil && out.Status != keel.StatusCompleted {
					err = fmt.Errorf("run %s %s", run.ID, out.Status)
				}
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	return len(errs), <-errs
}

// MeasureRunPairs runs n pairs of one-turn runs one after the other, one
// of each pair on model a and one on model b (a first in even pairs, b in
// odd ones, so neither gains from going second), each in a session of its
// own, and returns the time from each send to its outcome: a same-run
// comparison of two models' overheads.
func MeasureRunPairs(ctx context.Context, c *client.Client, a, b string, n int) (Latencies, Latencies, error) {
	var la, lb Latencies
	type side struct {
		model string
		out   *Latencies
	}
	for i := range n {
		pair := []side{{a, &la}, {b, &lb}}
		if i%2 == 1 {
			pair[0], pair[1] = pair[1], pair[0]
		}
		for _, m := range pair {
			start := time.Now()
			run, err := c.Session(fmt.Sprintf("pair-%d-%d", start.UnixNano(), i)).Send(ctx, "go",
				client.WithConfig(api.RunConfig{Model: m.model, Tools: []string{}}))
			if err != nil {
				return la, lb, err
			}
			if _, err := run.Outcome(ctx); err != nil {
				return la, lb, err
			}
			*m.out = append(*m.out, time.Since(start))
		}
	}
	return la, lb, nil
}

// MeasureReserve asks gate for n reservations under key's limit, one
// after the other, and returns each call's time: a rate update's round
// trip to the limit's workflow when the limit is quiet.
func MeasureReserve(ctx context.Context, gate activities.RateGate, key string, limit activities.RateLimit, n int) (Latencies, error) {
	var out Latencies
	for range n {
		start := time.Now()
		t, err := gate.Reserve(ctx, key, limit, 0)
		if err != nil {
			return out, err
		}
		out = append(out, time.Since(start))
		gate.GiveBack(key, t, false, 0)
	}
	return out, nil
}
