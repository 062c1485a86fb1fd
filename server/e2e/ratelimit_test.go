package e2e_test

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/ratelimit"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
	"github.com/keelrun/keel/server/provider"
	"github.com/keelrun/keel/server/worker"
)

// rateLimitState asks the RateLimit workflow of key for its state.
func rateLimitState(t *testing.T, ctx context.Context, tc sdkclient.Client, key string) ratelimit.RateLimitStatus {
	t.Helper()
	v, err := tc.QueryWorkflow(ctx, ratelimit.RateLimitWorkflowID(key), "", api.QueryState)
	require.NoError(t, err)
	var st ratelimit.RateLimitStatus
	require.NoError(t, v.Get(&st))
	return st
}

// waitingOf returns the model.waiting events a follower saw.
func waitingOf(seen []keel.Envelope) []keel.ModelWaiting {
	var out []keel.ModelWaiting
	for _, env := range seen {
		if env.Type == keel.TypeModelWaiting {
			out = append(out, decode[keel.ModelWaiting](env))
		}
	}
	return out
}

func sawWaiting(seen []keel.Envelope) bool { return len(waitingOf(seen)) > 0 }

// docs/contract.md §20.5, §7: a run waiting for its turn under a rate limit
// shows it (model.waiting, naming the limit and the wait), and a cancel
// ends it promptly with run.cancelled and no request sent; its place goes
// back to the limit, so the next run waits for the first run's place
// only, not for the cancelled one's too. Both ways of waiting: a minute
// (one a minute), which the run waits with a timer, and 8.6 s (seven a
// minute), which the model turn waits heartbeating
// (activities.LocalRateWait).
func TestCancelWhileWaitingForRateLimitE2E(t *testing.T) {
	for _, rpm := range []int{1, 7} {
		t.Run(fmt.Sprintf("%d a minute", rpm), func(t *testing.T) { testCancelWhileWaiting(t, rpm) })
	}
}

func testCancelWhileWaiting(t *testing.T, rpm int) {
	interval := time.Minute / time.Duration(rpm)
	p := scriptedFaults(t, `{"turns":[{"text":["done"],"usage":{"input_tokens":3,"output_tokens":1}}]}`)
	c, srv := faultsStackWith(t, p, keeltest.WorkerOptions{Policy: activities.Policy{
		RateLimits: map[string]activities.RateLimit{"scripted": {RequestsPerMinute: rpm}}}})
	ctx := testContext(t, 2*time.Minute)
	tc := keeltest.Dial(t, srv)

	// The first request takes the limit's burst (one) and is sent at once.
	began := time.Now()
	first, err := c.Session("rl-first").Send(ctx, "go")
	require.NoError(t, err)
	out, err := first.Outcome(ctx)
	require.NoError(t, err)
	require.Equal(t, keel.StatusCompleted, out.Status)
	taken := rateLimitState(t, ctx, tc, "scripted")

	// The second waits an interval for its turn, and shows it.
	second, err := c.Session("rl-second").Send(ctx, "go")
	require.NoError(t, err)
	f := followRun(ctx, second)
	w := waitingOf(f.waitFor(t, ctx, "model.waiting", sawWaiting))[0]
	require.Equal(t, keel.ModelWaiting{Step: 1, Attempt: 1, Limit: "scripted", Wait: w.Wait}, w)
	// The first took its interval after began, so the second's turn comes
	// no sooner than an interval after began, however slow the machine.
	require.GreaterOrEqual(t, w.Wait.Std(), interval-time.Since(began), "the first took the first interval")
	require.LessOrEqual(t, w.Wait.Std(), interval)
	waiting := rateLimitState(t, ctx, tc, "scripted")
	require.Equal(t, taken.Requests.Add(interval), waiting.Requests, "the second request took the next interval")

	out = cancelAndTime(t, ctx, second, "a wait for the rate limit", cancelBound)
	require.Equal(t, keel.StatusCancelled, out.Status)
	require.Equal(t, int32(1), p.requests.Load(), "the waiting request was never sent")
	events, err := second.Session().EventsAfter(ctx, 0)
	require.NoError(t, err)
	if diff := cmp.Diff([]string{keel.TypeRunStarted, keel.TypeStepStarted, keel.TypeRunCancelled}, types(events)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	requireSessionLog(t, events)

	// The cancelled place went back (the give-back goes before any later
	// reservation of this worker): a third request waits for the first
	// one's interval, not for two.
	third, err := c.Session("rl-third").Send(ctx, "go")
	require.NoError(t, err)
	f3 := followRun(ctx, third)
	w3 := waitingOf(f3.waitFor(t, ctx, "model.waiting", sawWaiting))[0]
	require.LessOrEqual(t, w3.Wait.Std(), w.Wait.Std(), "the third waits no longer than the cancelled second did")
	after := rateLimitState(t, ctx, tc, "scripted")
	require.Equal(t, waiting.Requests, after.Requests, "the cancelled interval was taken again by the third, not added to")
	cancelAndTime(t, ctx, third, "a second wait for the rate limit", cancelBound)
	f.stop()
	f3.stop()
}

// stampedProvider records when each of its requests was sent, into a log
// it shares with other workers' providers.
type stampedProvider struct {
	provider.Provider
	worker int
	log    *requestLog
}

type requestLog struct {
	mu    sync.Mutex
	at    []time.Time
	byWkr map[int]int
}

func (p *stampedProvider) Stream(ctx context.Context, req provider.Request) iter.Seq2[provider.Chunk, error] {
	p.log.mu.Lock()
	p.log.at = append(p.log.at, time.Now())
	p.log.byWkr[p.worker]++
	p.log.mu.Unlock()
	return p.Provider.Stream(ctx, req)
}

func (p *stampedProvider) Resolve(string) (provider.Provider, string, error) {
	return p, "test-model", nil
}

// docs/contract.md §20.5: a limit holds across workers. Two workers share
// one limit of 150 requests a minute (2.5 a second, a burst of 2); 30 runs
// of one model turn each, sent at once and served by both, are paced as
// one stream: the requests beyond the burst take at least 11.2 s, where
// two workers pacing alone would send them in about 5 s (2x the limit).
// The test holds the observed rate, as a ratio to the limit, to at most
// 1.15 (later is always allowed: a loaded machine only slows requests
// down).
func TestRateLimitHoldsAcrossWorkersE2E(t *testing.T) {
	const runs, rpm = 30, 150
	srv := keeltest.StartServer(t, devserver.Config{})
	mem := live.NewMemory()
	t.Cleanup(func() { _ = mem.Close() })
	log := &requestLog{byWkr: map[int]int{}}
	policy := activities.Policy{RateLimits: map[string]activities.RateLimit{"scripted": {RequestsPerMinute: rpm}}}
	for w := range 2 {
		base := scriptedFaults(t, `{"turns":[{"text":["done"]}]}`)
		keeltest.StartWorker(t, srv, keeltest.WorkerOptions{Models: &stampedProvider{Provider: base, worker: w, log: log},
			Live: mem, Policy: policy})
	}
	c := keeltest.Client(t, srv, mem)
	ctx := testContext(t, 3*time.Minute)

	var wg sync.WaitGroup
	errs := make(chan error, runs)
	for i := range runs {
		wg.Go(func() {
			run, err := c.Session(fmt.Sprintf("rl-shared-%d", i)).Send(ctx, "go")
			if err == nil {
				_, err = run.Outcome(ctx)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	require.Len(t, log.at, runs)
	slices.SortFunc(log.at, func(a, b time.Time) int { return a.Compare(b) })
	span := log.at[runs-1].Sub(log.at[0])
	burst := rpm / 60
	want := time.Duration(runs-burst) * time.Minute / rpm
	ratio := want.Seconds() / span.Seconds()
	t.Logf("%d requests through 2 workers (%v) at %d/min: the %d beyond the burst took %v, %v at the limit: %.3fx the configured rate",
		runs, log.byWkr, rpm, runs-burst, span.Round(time.Millisecond), want, ratio)
	require.Positive(t, log.byWkr[0], "both workers served requests")
	require.Positive(t, log.byWkr[1], "both workers served requests")
	require.LessOrEqual(t, ratio, 1.15, "the two workers together sent faster than the limit")
}

// docs/contract.md §20.5: when the limit cannot be reached (here, its
// server is gone), a request keeps asking while its context lives, and
// only the context's end ends the wait; no request goes out unpaced.
func TestRateLimitUnreachableKeepsTryingE2E(t *testing.T) {
	srv := keeltest.StartServer(t, devserver.Config{})
	policy := activities.Policy{RateLimits: map[string]activities.RateLimit{"scripted": {RequestsPerMinute: 60}}}
	keeltest.StartWorker(t, srv, keeltest.WorkerOptions{Script: `{"turns":[{"text":["done"]}]}`, Policy: policy})
	acts, err := worker.NewActivities(keeltest.Dial(t, srv), worker.Options{Workspace: t.TempDir(), Policy: policy})
	require.NoError(t, err)
	ctx := testContext(t, time.Minute)
	tk, err := acts.Rates.Reserve(ctx, "scripted", policy.RateLimits["scripted"], 0)
	require.NoError(t, err)
	require.Zero(t, tk.Wait, "the limit's burst")

	require.NoError(t, srv.Stop())
	wait, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = acts.Rates.Reserve(wait, "scripted", policy.RateLimits["scripted"], 0)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the request waited for the limit until its context ended")
}
