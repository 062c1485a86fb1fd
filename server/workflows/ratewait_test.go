package workflows_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/server/activities"
)

// longWaitGate is a rate gate whose first reservation waits `wait` and
// the others none; it records what comes back. It stands in for the
// RateLimit workflow, which has tests of its own (ratelimit_test.go).
type longWaitGate struct {
	wait time.Duration

	mu       sync.Mutex
	reserved int
	backs    []givenBack
}

type givenBack struct {
	ID   string
	Sent bool
	Used int64
}

func (g *longWaitGate) Reserve(_ context.Context, _ string, _ activities.RateLimit, tokens int64) (activities.RateTicket, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.reserved++
	t := activities.RateTicket{ID: fmt.Sprint("r", g.reserved), Tokens: tokens}
	if g.reserved == 1 {
		t.Wait = g.wait
	}
	return t, nil
}

func (g *longWaitGate) GiveBack(_ string, t activities.RateTicket, sent bool, used int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.backs = append(g.backs, givenBack{ID: t.ID, Sent: sent, Used: used})
}

func (g *longWaitGate) given() ([]givenBack, int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]givenBack(nil), g.backs...), g.reserved
}

// newRateWaitEnv is a run environment whose model is held to a rate limit
// kept by gate.
func newRateWaitEnv(t *testing.T, gate *longWaitGate) *runEnv {
	t.Helper()
	e := newRunEnv(t, `{"turns":[{"text":["done"],"usage":{"input_tokens":7,"output_tokens":2}}]}`)
	e.acts.Policy.RateLimits = map[string]activities.RateLimit{"scripted:test": {RequestsPerMinute: 1, TokensPerMinute: 100_000}}
	e.acts.Rates = gate
	return e
}

// docs/contract.md §20.5: a turn told to wait longer than
// activities.LocalRateWait hands the wait to its run, which waits with a
// durable timer (no heartbeats) and sends the same attempt with the place
// it was given, asking the limit nothing more; the wait counts no
// request, and the reply settles that place.
func TestRunWaitsForItsRateLimitWithATimer(t *testing.T) {
	gate := &longWaitGate{wait: 3 * time.Minute}
	e := newRateWaitEnv(t, gate)
	start := e.Now()
	res := e.execSession(t, promptOf("go"))
	require.Equal(t, keel.StatusCompleted, res.Outcome.Status)
	require.GreaterOrEqual(t, e.Now().Sub(start), 3*time.Minute, "the run waited on its clock")
	require.Equal(t, []string{keel.TypeRunStarted, keel.TypeStepStarted, keel.TypeUsageUpdated,
		keel.TypeModelCallCompleted, keel.TypeRunCompleted}, types(res.Events))
	var done keel.ModelCallCompleted
	for _, ev := range decode(t, res.Events) {
		if c, ok := ev.(keel.ModelCallCompleted); ok {
			done = c
		}
	}
	require.Equal(t, 1, done.Attempt, "the wait is no attempt")
	backs, reserved := gate.given()
	require.Equal(t, 1, reserved, "the second activity used the place the first was given")
	require.Equal(t, []givenBack{{ID: "r1", Sent: true, Used: 9}}, backs, "settled to the reply's 9 tokens")
}

// Cancelled while its timer waits, the run ends with run.cancelled and no
// request, and its place goes back to the limit (a local activity).
func TestRunCancelledWhileItsTimerWaitsGivesThePlaceBack(t *testing.T) {
	gate := &longWaitGate{wait: time.Hour}
	e := newRateWaitEnv(t, gate)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(api.SignalCancel, nil) }, time.Minute)
	res := e.execSession(t, promptOf("go"))
	require.Equal(t, keel.StatusCancelled, res.Outcome.Status)
	require.Equal(t, []string{keel.TypeRunStarted, keel.TypeStepStarted, keel.TypeRunCancelled}, types(res.Events))
	require.Zero(t, res.Outcome.UsageTotal.Requests)
	backs, reserved := gate.given()
	require.Equal(t, 1, reserved)
	require.Equal(t, []givenBack{{ID: "r1"}}, backs, "the place, unsent, went back")
}
