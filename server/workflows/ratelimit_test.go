package workflows_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/ratelimit"
	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/worker"
)

// rateEnv runs a RateLimit workflow in the test environment, on its
// simulated clock, from a fixed start time.
type rateEnv struct {
	*testsuite.TestWorkflowEnvironment
	t *testing.T
}

var rateStart = time.Unix(1_700_000_000, 0).UTC()

func newRateEnv(t *testing.T) *rateEnv {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	worker.Register(env, &activities.Activities{})
	env.SetStartTime(rateStart)
	return &rateEnv{TestWorkflowEnvironment: env, t: t}
}

// at runs f once the workflow's clock is d after its start.
func (e *rateEnv) at(d time.Duration, f func()) { e.RegisterDelayedCallback(f, d) }

// rate sends an UpdateRate update and keeps its waits in out.
func (e *rateEnv) rate(id string, req ratelimit.RateRequest, out *[]time.Duration) {
	e.UpdateWorkflow(ratelimit.UpdateRate, id, &testsuite.TestUpdateCallback{
		OnReject: func(err error) { e.t.Errorf("update %s refused: %v", id, err) },
		OnAccept: func() {},
		OnComplete: func(v any, err error) {
			require.NoError(e.t, err, "update %s", id)
			*out = nil
			for _, w := range v.(ratelimit.RateGrant).Waits {
				*out = append(*out, w.Std())
			}
		},
	}, req)
}

// status asks the workflow's state query.
func (e *rateEnv) status() ratelimit.RateLimitStatus {
	e.t.Helper()
	v, err := e.QueryWorkflow(api.QueryState)
	require.NoError(e.t, err)
	var st ratelimit.RateLimitStatus
	require.NoError(e.t, v.Get(&st))
	return st
}

// run starts the limit named key from state and ends it (a cancel) at
// end, unless it continued as new before.
func (e *rateEnv) run(key string, state ratelimit.RateLimitState, end time.Duration) {
	e.at(end, e.CancelWorkflow)
	e.ExecuteWorkflow(ratelimit.RateLimitWorkflowName, ratelimit.RateLimitInput{Key: key, State: state})
}

func reservations(prefix string, n int, tokens int64) []ratelimit.RateReservation {
	rs := make([]ratelimit.RateReservation, n)
	for i := range rs {
		rs[i] = ratelimit.RateReservation{ID: fmt.Sprintf("%s-%d", prefix, i), Tokens: tokens}
	}
	return rs
}

// docs/contract.md §20.5: requests that ask at once are paced to the
// limit. Of 10, 100 or 500 asking at once at 120 a minute, those told to
// go within the first minute are the minute's rate and the one-second
// burst's extra request, as a ratio; the 500th waits 4 min 9 s.
func TestRateLimitHoldsTheConfiguredRate(t *testing.T) {
	for _, asks := range []int{10, 100, 500} {
		e := newRateEnv(t)
		var waits []time.Duration
		e.at(0, func() {
			e.rate("u1", ratelimit.RateRequest{Limit: ratelimit.RateLimit{RequestsPerMinute: 120}, Reserve: reservations("r", asks, 0)}, &waits)
		})
		e.run("scripted", ratelimit.RateLimitState{}, time.Second)
		require.Len(t, waits, asks)
		n := 0
		for i, w := range waits {
			if w < time.Minute {
				n++
			}
			if i > 0 && w < waits[i-1] {
				t.Fatalf("%d asking at once: reservation %d waits %v, less than the one before (%v)", asks, i, w, waits[i-1])
			}
		}
		want := min(asks, 120+1)
		ratio := float64(n) / float64(want)
		require.InDelta(t, 1.0, ratio, 0.02, "%d asking at once: %d sent in the first minute, want %d", asks, n, want)
		if asks == 500 {
			require.Equal(t, 4*time.Minute+9*time.Second, waits[499])
		}
		t.Logf("%d asking at once: %d sent in the first minute at 120/min (%.3f× expected); the last waits %v", asks, n, ratio, waits[asks-1])
	}
}

// The pace is kept in workflow time: requests asking one by one are
// spaced at the rate, and an idle limit is whole again; tokens burst a
// minute's worth and are paced past it.
func TestRateLimitPacesOnWorkflowTime(t *testing.T) {
	e := newRateEnv(t)
	rpm := ratelimit.RateLimit{RequestsPerMinute: 60, TokensPerMinute: 6000}
	var first, second, later, big []time.Duration
	e.at(0, func() { e.rate("u1", ratelimit.RateRequest{Limit: rpm, Reserve: reservations("a", 3, 1000)}, &first) })
	e.at(500*time.Millisecond, func() { e.rate("u2", ratelimit.RateRequest{Limit: rpm, Reserve: reservations("b", 1, 1000)}, &second) })
	e.at(time.Hour, func() { e.rate("u3", ratelimit.RateRequest{Limit: rpm, Reserve: reservations("c", 1, 1000)}, &later) })
	// A minute's tokens at once pass; the next 3,000 wait half a minute.
	e.at(2*time.Hour, func() {
		e.rate("u4", ratelimit.RateRequest{Limit: ratelimit.RateLimit{TokensPerMinute: 6000}, Reserve: []ratelimit.RateReservation{
			{ID: "d-0", Tokens: 6000}, {ID: "d-1", Tokens: 3000}}}, &big)
	})
	e.run("anthropic", ratelimit.RateLimitState{}, 3*time.Hour)
	// 60 a minute: one a second, the first at once (a second's burst).
	require.Equal(t, []time.Duration{0, time.Second, 2 * time.Second}, first)
	require.Equal(t, []time.Duration{2500 * time.Millisecond}, second, "asked half a second later, behind the three")
	require.Equal(t, []time.Duration{0}, later, "an idle limit is whole again")
	require.Equal(t, []time.Duration{0, 30 * time.Second}, big)
}

// A reservation given back before its request was sent returns its place
// to the next asker; a reply smaller than its estimate returns the
// tokens it did not use, a larger one takes more; a reservation asked
// again is answered again, never taken twice; a give-back of what the
// limit does not hold changes nothing.
func TestRateLimitTakesReservationsBack(t *testing.T) {
	e := newRateEnv(t)
	rpm := ratelimit.RateLimit{RequestsPerMinute: 60}
	var abc, again, d, none, tok1, tok2, tok3 []time.Duration
	var before, after ratelimit.RateLimitStatus
	e.at(0, func() { e.rate("u1", ratelimit.RateRequest{Limit: rpm, Reserve: reservations("r", 3, 0)}, &abc) })
	e.at(time.Millisecond, func() {
		e.rate("u2", ratelimit.RateRequest{Limit: rpm, Reserve: []ratelimit.RateReservation{{ID: "r-2"}}}, &again)
	})
	// r-1 (waiting a second) is cancelled: d takes its place.
	e.at(2*time.Millisecond, func() {
		e.rate("u3", ratelimit.RateRequest{Limit: rpm, GiveBack: []ratelimit.RateGiveBack{{ID: "r-1"}}, Reserve: []ratelimit.RateReservation{{ID: "d"}}}, &d)
	})
	// Give-backs of IDs never held, or already given back, change nothing.
	e.at(3*time.Millisecond, func() {
		before = e.status()
		e.rate("u4", ratelimit.RateRequest{Limit: rpm, GiveBack: []ratelimit.RateGiveBack{{ID: "nobody"}, {ID: "r-1"}, {ID: "x", Sent: true, Used: 5}}}, &none)
	})
	e.at(4*time.Millisecond, func() { after = e.status() })

	tpm := ratelimit.RateLimit{TokensPerMinute: 6000}
	e.at(time.Hour, func() {
		e.rate("t1", ratelimit.RateRequest{Limit: tpm, Reserve: []ratelimit.RateReservation{{ID: "t-a", Tokens: 6000}, {ID: "t-b", Tokens: 3000}}}, &tok1)
	})
	// t-a used a tenth of its estimate: 5,400 come back, and the next
	// 3,000 wait 6 s where they would have waited a minute.
	e.at(time.Hour+time.Millisecond, func() {
		e.rate("t2", ratelimit.RateRequest{Limit: tpm, GiveBack: []ratelimit.RateGiveBack{{ID: "t-a", Sent: true, Used: 600}},
			Reserve: []ratelimit.RateReservation{{ID: "t-c", Tokens: 3000}}}, &tok2)
	})
	// t-b used 9,000 of its 3,000: the next 3,000 wait a minute more.
	e.at(time.Hour+2*time.Millisecond, func() {
		e.rate("t3", ratelimit.RateRequest{Limit: tpm, GiveBack: []ratelimit.RateGiveBack{{ID: "t-b", Sent: true, Used: 9000}},
			Reserve: []ratelimit.RateReservation{{ID: "t-d", Tokens: 3000}}}, &tok3)
	})
	e.run("openai", ratelimit.RateLimitState{}, 2*time.Hour)

	require.Equal(t, []time.Duration{0, time.Second, 2 * time.Second}, abc)
	require.Equal(t, []time.Duration{2*time.Second - time.Millisecond}, again, "asked again: the same time, not a new place")
	require.Equal(t, []time.Duration{2*time.Second - 2*time.Millisecond}, d, "the cancelled place, not a fourth")
	require.Equal(t, before.Requests, after.Requests, "give-backs of what is not held change nothing")
	require.Equal(t, before.Held, after.Held)
	require.Equal(t, []time.Duration{0, 30 * time.Second}, tok1)
	require.Equal(t, []time.Duration{6*time.Second - time.Millisecond}, tok2)
	require.Equal(t, []time.Duration{96*time.Second - 2*time.Millisecond}, tok3)
}

// After ratelimit.RateUpdatesPerRun updates the limit continues as new, and its
// next execution carries the pace and the reservations it holds: a
// reservation given back to the new execution returns its place.
func TestRateLimitContinuesAsNewWithItsState(t *testing.T) {
	e := newRateEnv(t)
	rpm := ratelimit.RateLimit{RequestsPerMinute: 60}
	var last []time.Duration
	// One update a millisecond (the environment queues only so many
	// callbacks and updates at once), each registering the next.
	var next func(i int)
	next = func(i int) {
		e.rate(fmt.Sprint("u", i), ratelimit.RateRequest{Limit: rpm, Reserve: []ratelimit.RateReservation{{ID: fmt.Sprint("r-", i)}}}, &last)
		if i+1 < ratelimit.RateUpdatesPerRun {
			e.at(time.Millisecond, func() { next(i + 1) })
		}
	}
	e.at(0, func() { next(0) })
	e.run("scripted", ratelimit.RateLimitState{}, time.Hour)
	require.True(t, e.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(e.GetWorkflowError(), &can), "continued as new: %v", e.GetWorkflowError())
	require.Equal(t, ratelimit.RateLimitWorkflowName, can.WorkflowType.Name)
	var in ratelimit.RateLimitInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &in))
	require.Equal(t, "scripted", in.Key)
	// 1,000 requests at one a second, asked within the first second: the
	// pace runs 1,000 s ahead, and every reservation is held until a
	// minute after its time.
	require.Equal(t, rateStart.Add(1000*time.Second), in.State.Requests)
	require.Len(t, in.State.Held, ratelimit.RateUpdatesPerRun)
	require.Equal(t, 999*time.Second-999*time.Millisecond, last[0])

	e2 := newRateEnv(t)
	e2.SetStartTime(rateStart.Add(time.Second))
	var back []time.Duration
	e2.at(0, func() {
		e2.rate("v1", ratelimit.RateRequest{Limit: rpm, GiveBack: []ratelimit.RateGiveBack{{ID: "r-999"}},
			Reserve: []ratelimit.RateReservation{{ID: "s-0"}}}, &back)
	})
	e2.run(in.Key, in.State, time.Second)
	require.Equal(t, []time.Duration{998 * time.Second}, back, "the last place, given back, is taken again")
}

// Every argument is bounded (docs/contract.md §20.5): the validator
// refuses a hostile update with keel.InvalidInput before it enters
// history, and the limit's pace is unchanged.
func TestRateLimitRefusesHostileRequests(t *testing.T) {
	rpm := ratelimit.RateLimit{RequestsPerMinute: 60}
	long := strings.Repeat("x", ratelimit.MaxRateIDBytes+1)
	cases := map[string]ratelimit.RateRequest{
		"negative tokens":        {Limit: rpm, Reserve: []ratelimit.RateReservation{{ID: "a", Tokens: -1}}},
		"too many tokens":        {Limit: rpm, Reserve: []ratelimit.RateReservation{{ID: "a", Tokens: ratelimit.MaxRateTokens + 1}}},
		"too many reservations":  {Limit: rpm, Reserve: reservations("r", ratelimit.MaxRateBatch+1, 0)},
		"too many give-backs":    {Limit: rpm, GiveBack: make([]ratelimit.RateGiveBack, ratelimit.MaxRateBatch+1)},
		"an empty ID":            {Limit: rpm, Reserve: []ratelimit.RateReservation{{ID: ""}}},
		"a long ID":              {Limit: rpm, Reserve: []ratelimit.RateReservation{{ID: long}}},
		"a long give-back ID":    {Limit: rpm, GiveBack: []ratelimit.RateGiveBack{{ID: long}}},
		"an ID twice":            {Limit: rpm, Reserve: []ratelimit.RateReservation{{ID: "a"}, {ID: "a"}}},
		"negative used":          {Limit: rpm, GiveBack: []ratelimit.RateGiveBack{{ID: "a", Sent: true, Used: -5}}},
		"huge used":              {Limit: rpm, GiveBack: []ratelimit.RateGiveBack{{ID: "a", Sent: true, Used: ratelimit.MaxRateTokens + 1}}},
		"a negative rate":        {Limit: ratelimit.RateLimit{RequestsPerMinute: -1}, Reserve: []ratelimit.RateReservation{{ID: "a"}}},
		"requests above the max": {Limit: ratelimit.RateLimit{RequestsPerMinute: ratelimit.MaxRequestsPerMinute + 1}, Reserve: []ratelimit.RateReservation{{ID: "a"}}},
		"tokens above the max":   {Limit: ratelimit.RateLimit{TokensPerMinute: ratelimit.MaxTokensPerMinute + 1}, Reserve: []ratelimit.RateReservation{{ID: "a"}}},
		"a limit of nothing":     {Reserve: []ratelimit.RateReservation{{ID: "a"}}},
	}
	e := newRateEnv(t)
	var before, after ratelimit.RateLimitStatus
	var first []time.Duration
	e.at(0, func() { e.rate("ok", ratelimit.RateRequest{Limit: rpm, Reserve: reservations("r", 2, 0)}, &first) })
	e.at(time.Millisecond, func() {
		before = e.status()
		for name, req := range cases {
			e.UpdateWorkflow(ratelimit.UpdateRate, name, &testsuite.TestUpdateCallback{
				OnAccept:   func() { t.Errorf("%s: accepted", name) },
				OnComplete: func(any, error) {},
				OnReject: func(err error) {
					if ke := keelErrorOf(t, err); ke.Code != keel.CodeInvalidInput {
						t.Errorf("%s: refused with %v, want keel.InvalidInput", name, ke)
					}
				},
			}, req)
		}
	})
	e.at(2*time.Millisecond, func() { after = e.status() })
	e.run("scripted", ratelimit.RateLimitState{}, time.Second)
	require.Equal(t, before, after, "refused updates change nothing")
	require.Equal(t, 1, after.Updates)

	// A limit whose name is not one refuses to start.
	bad := newRateEnv(t)
	bad.ExecuteWorkflow(ratelimit.RateLimitWorkflowName, ratelimit.RateLimitInput{Key: "a\nb"})
	require.Equal(t, keel.CodeInvalidInput, keelErrorOf(t, bad.GetWorkflowError()).Code)
}
