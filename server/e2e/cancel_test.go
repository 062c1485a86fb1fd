package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/server/internal/keeltest"
)

// cancelBound separates the path each test exercises from the slower one
// it must not fall back to: a hanging stream cancelled through the
// activity's heartbeat (ten seconds apart where a test tests the fast
// path) or a cancel notice, and a durable retry wait of 60 s. The
// contract's latency (cancel to outcome ≤ 500 ms p99) is a measurement,
// not a test under -race beside other packages: `keel-bench concurrency`
// holds it against its target (docs/performance.md).
const cancelBound = 5 * time.Second

// cancelAndTime cancels run and waits for its outcome, which must be
// ErrCancelled; the time from the cancel to the outcome is logged and held
// to bound (not fatally: what the run committed is checked whatever
// the time).
func cancelAndTime(t *testing.T, ctx context.Context, run *client.Run, what string, bound time.Duration) keel.Outcome {
	t.Helper()
	start := time.Now()
	require.NoError(t, run.Cancel(ctx))
	out, err := run.Outcome(ctx)
	elapsed := time.Since(start)
	require.ErrorIs(t, err, keel.ErrCancelled)
	t.Logf("cancel during %s: outcome after %v", what, elapsed.Round(time.Millisecond))
	assert.Less(t, elapsed, bound, "cancel to outcome")
	return out
}

// hangingStream is a turn whose stream hangs after two chunks.
const hangingStream = `{"turns":[{"failures":[{"kind":"hang","after_chunks":2}],
  "text":["Hel","lo"," world"],"usage":{"input_tokens":10,"output_tokens":5}}]}`

// Cancel while the provider stream hangs after two chunks: the outcome is
// ErrCancelled within cancelBound of the cancel, the streamed text is kept as
// an aborted assistant message, and no further request is made.
func TestCancelDuringStreamE2E(t *testing.T) {
	testCancelDuringStream(t, keeltest.WorkerOptions{}, cancelBound)
}

// The fast path (docs/contract.md §7.5): with heartbeats ten seconds apart,
// the workflow's cancel notice sends the worker to the run's history at
// once, so the activity hands back its partial text within the bound
// (without it, the workflow would give up on the activity after its grace
// period and keep no text).
func TestCancelFastPathE2E(t *testing.T) {
	testCancelDuringStream(t, keeltest.WorkerOptions{HeartbeatInterval: 10 * time.Second}, cancelBound)
}

// On a live channel without cancel notices, the worker follows the
// history of every run it streams for, and finds the cancellation there
// as fast.
func TestCancelFastPathWithoutNoticesE2E(t *testing.T) {
	testCancelDuringStreamLive(t, keeltest.WorkerOptions{HeartbeatInterval: 10 * time.Second}, cancelBound,
		func(m *live.Memory) live.Publisher { return publishOnly{m} })
}

// With notices that never arrive, the worker does not read the run's
// history, and the heartbeat brings the cancellation: slower, not lost.
func TestCancelNoticeLostE2E(t *testing.T) {
	testCancelDuringStreamLive(t, keeltest.WorkerOptions{HeartbeatInterval: time.Second}, cancelBound,
		func(m *live.Memory) live.Publisher { return lostNotices{publishOnly{m}} })
}

// publishOnly is a live channel that carries events and no cancel notices.
type publishOnly struct{ p live.Publisher }

func (p publishOnly) Publish(ctx context.Context, env keel.Envelope) error {
	return p.p.Publish(ctx, env)
}

// lostNotices takes cancel notices and delivers none.
type lostNotices struct{ publishOnly }

func (lostNotices) NotifyCancel(live.CancelNotice) error { return nil }

func (lostNotices) OnCancel(func(live.CancelNotice)) (func(), error) { return func() {}, nil }

// Without the fast path, Temporal still delivers the cancellation with the
// next heartbeat response: slower, never lost; the partial text is kept.
func TestCancelWithoutFastPathE2E(t *testing.T) {
	testCancelDuringStream(t, keeltest.WorkerOptions{NoCancelWatch: true, HeartbeatInterval: time.Second},
		cancelBound)
}

func testCancelDuringStream(t *testing.T, opts keeltest.WorkerOptions, bound time.Duration) {
	testCancelDuringStreamLive(t, opts, bound, nil)
}

func testCancelDuringStreamLive(t *testing.T, opts keeltest.WorkerOptions, bound time.Duration, workerLive func(*live.Memory) live.Publisher) {
	p := scriptedFaults(t, hangingStream)
	c, srv := faultsStackLive(t, p, opts, workerLive)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	run, err := c.Session("cancel-stream").Send(ctx, "go")
	require.NoError(t, err)
	// Wait until the activity has taken both chunks; the stream then hangs.
	p.awaitTexts(t, ctx, 2)

	out := cancelAndTime(t, ctx, run, "a hanging stream", bound)

	require.Equal(t, keel.StatusCancelled, out.Status)
	require.Equal(t, int32(1), p.requests.Load(), "no request after the cancel")
	require.Equal(t, 1, out.UsageTotal.Requests)

	// The run executed in the session's own workflow (an inline session):
	// there is no Run workflow, and what the run committed is the session's
	// transcript and log.
	_, err = keeltest.Dial(t, srv).DescribeWorkflowExecution(ctx, run.ID, "")
	var nf *serviceerror.NotFound
	require.ErrorAs(t, err, &nf, "no Run workflow %s", run.ID)
	sess := run.Session()
	page, err := sess.History(ctx, 0, 0)
	require.NoError(t, err)
	want := []keel.Message{keel.UserMessage("go"), {Role: keel.RoleAssistant, Content: "Hello", Aborted: true}}
	if diff := cmp.Diff(want, page.Messages); diff != "" {
		t.Fatalf("messages (-want +got):\n%s", diff)
	}
	events, err := sess.EventsAfter(ctx, 0)
	require.NoError(t, err)
	if diff := cmp.Diff([]string{keel.TypeRunStarted, keel.TypeStepStarted, keel.TypeUsageUpdated, keel.TypeRunCancelled}, types(events)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	requireSessionLog(t, events)
}

// Cancel during the 60 s wait a 429 asked for: the outcome is ErrCancelled
// within cancelBound of the cancel, and the second request never happens.
func TestCancelDuringRetryWaitE2E(t *testing.T) {
	p := scriptedFaults(t, `{"turns":[{"failures":[{"kind":"rate_limited","status":429,"retry_after":"60s"}],
	  "text":["Hello"]}]}`)
	c, _ := faultsStack(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	run, err := c.Session("cancel-retry-wait").Send(ctx, "go")
	require.NoError(t, err)
	// Wait for the durable retry announcement: the timer is running.
	var seen []keel.Envelope
	for ev, err := range run.Events(ctx) {
		require.NoError(t, err)
		if ev.Durable() {
			seen = append(seen, ev)
		}
		if ev.Type == keel.TypeProviderRetry {
			break
		}
	}
	retry := faultsFind[keel.ProviderRequestRetry](t, seen)
	require.Len(t, retry, 1)
	require.Equal(t, keel.Duration(60*time.Second), retry[0].Delay)

	out := cancelAndTime(t, ctx, run, "a 60 s retry wait", cancelBound)

	require.Equal(t, keel.StatusCancelled, out.Status)
	require.Equal(t, int32(1), p.requests.Load(), "no request after the cancel")
	events, err := run.Session().EventsAfter(ctx, 0)
	require.NoError(t, err)
	want := []string{keel.TypeRunStarted, keel.TypeStepStarted, keel.TypeUsageUpdated,
		keel.TypeProviderStreamReset, keel.TypeProviderRetry, keel.TypeRunCancelled}
	if diff := cmp.Diff(want, types(events)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
}
