package e2e_test

import (
	"context"
	"iter"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
	"github.com/keelrun/keel/server/provider"
	"github.com/keelrun/keel/server/provider/openai"
	"github.com/keelrun/keel/server/provider/providertest"
	"github.com/keelrun/keel/server/provider/scripted"
)

// Helpers of the fault and cancel tests are prefixed "faults" so other
// tests in this package can name theirs freely.

// faultsProvider wraps a provider to count its physical requests and to
// report each text chunk once the activity has taken it, so a test can act
// at a known point of a stream.
type faultsProvider struct {
	provider.Provider
	requests atomic.Int32
	texts    chan string
}

func newFaultsProvider(p provider.Provider) *faultsProvider {
	return &faultsProvider{Provider: p, texts: make(chan string, 64)}
}

func (f *faultsProvider) Stream(ctx context.Context, req provider.Request) iter.Seq2[provider.Chunk, error] {
	f.requests.Add(1)
	return func(yield func(provider.Chunk, error) bool) {
		for c, err := range f.Provider.Stream(ctx, req) {
			if !yield(c, err) {
				return
			}
			// yield returned: the activity has handled (and published) it.
			if c.Text != "" {
				select {
				case f.texts <- c.Text:
				default:
				}
			}
		}
	}
}

// scriptedFaults is a faultsProvider playing a scripted-provider script.
func scriptedFaults(t *testing.T, script string) *faultsProvider {
	t.Helper()
	s, err := scripted.Parse([]byte(script))
	require.NoError(t, err)
	return newFaultsProvider(scripted.New(s))
}

// awaitTexts waits until the activity has taken n text chunks.
func (f *faultsProvider) awaitTexts(t *testing.T, ctx context.Context, n int) {
	t.Helper()
	for range n {
		select {
		case <-f.texts:
		case <-ctx.Done():
			t.Fatal("the stream never started")
		}
	}
}

// Resolve makes faultsProvider its own resolver: every model spec is it.
func (f *faultsProvider) Resolve(string) (provider.Provider, string, error) {
	return f, "test-model", nil
}

var _ activities.ModelResolver = (*faultsProvider)(nil)

// faultsStack starts an embedded Temporal server, a keel worker whose
// models all resolve to p, and a client; all share an in-memory live
// channel.
func faultsStack(t *testing.T, p *faultsProvider) (*client.Client, *devserver.Server) {
	t.Helper()
	return faultsStackWith(t, p, keeltest.WorkerOptions{})
}

// faultsStackWith is faultsStack with a worker configured by opts.
func faultsStackWith(t *testing.T, p *faultsProvider, opts keeltest.WorkerOptions) (*client.Client, *devserver.Server) {
	t.Helper()
	return faultsStackLive(t, p, opts, nil)
}

// faultsStackLive is faultsStackWith whose worker publishes to
// workerLive(the client's channel) instead of the channel itself.
func faultsStackLive(t *testing.T, p *faultsProvider, opts keeltest.WorkerOptions, workerLive func(*live.Memory) live.Publisher) (*client.Client, *devserver.Server) {
	t.Helper()
	srv := keeltest.StartServer(t, devserver.Config{})
	mem := live.NewMemory()
	t.Cleanup(func() { _ = mem.Close() })
	opts.Models, opts.Live = p, mem
	if workerLive != nil {
		opts.Live = workerLive(mem)
	}
	keeltest.StartWorker(t, srv, opts)
	return keeltest.Client(t, srv, mem), srv
}

// faultsDurable follows a run to its end and returns its durable events.
func faultsDurable(ctx context.Context, t *testing.T, run *client.Run) []keel.Envelope {
	t.Helper()
	var out []keel.Envelope
	for ev, err := range run.Events(ctx) {
		require.NoError(t, err)
		if ev.Durable() {
			out = append(out, ev)
		}
	}
	return out
}

func faultsFind[E keel.Event](t *testing.T, evs []keel.Envelope) []E {
	t.Helper()
	var out []E
	for _, env := range evs {
		ev, err := env.Event()
		require.NoError(t, err)
		if e, ok := ev.(E); ok {
			out = append(out, e)
		}
	}
	return out
}

// faultsFixture is the path of a fixture of the OpenAI backend's tests.
func faultsFixture(name string) string {
	return filepath.Join("..", "provider", "openai", "testdata", name)
}

// faultsOpenAIRun runs one prompt through the whole chain: client, server,
// the session workflow, the ModelTurn activity, the OpenAI backend and the httptest
// server's wire format.
func faultsOpenAIRun(t *testing.T, hs *providertest.Server, session string) (keel.Outcome, error, []keel.Envelope) {
	t.Helper()
	p, err := openai.New(openai.Config{BaseURL: hs.URL, APIKey: "sk-test-key"})
	require.NoError(t, err)
	c, _ := faultsStack(t, newFaultsProvider(p))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := c.Session(session).Send(ctx, "hi", client.WithConfig(api.RunConfig{Model: "openai:gpt-test"}))
	require.NoError(t, err)
	events := faultsDurable(ctx, t, run)
	out, err := run.Outcome(ctx)
	return out, err, events
}

// A 429 with Retry-After: 1 and then a good stream, through the whole
// chain on a real server: the run completes after two physical requests,
// at least the announced second apart, with the retry recorded in order.
func TestFaultsOpenAIRetryAfterE2E(t *testing.T) {
	hs := providertest.NewServer(t,
		providertest.Error(t, http.StatusTooManyRequests, http.Header{"Retry-After": {"1"}}, faultsFixture("error_429.json")),
		providertest.SSE(t, faultsFixture("text.sse")))
	out, err, events := faultsOpenAIRun(t, hs, "faults-openai-429")
	require.NoError(t, err)
	require.Equal(t, keel.StatusCompleted, out.Status)
	require.Equal(t, "Hello, world!", out.Text)

	want := []string{keel.TypeRunStarted, keel.TypeStepStarted,
		keel.TypeUsageUpdated, keel.TypeProviderStreamReset, keel.TypeProviderRetry,
		keel.TypeUsageUpdated, keel.TypeModelCallCompleted, keel.TypeRunCompleted}
	if diff := cmp.Diff(want, types(events)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	for i, ev := range events {
		require.Equal(t, int64(i+1), ev.Seq)
	}

	reqs := hs.Requests()
	require.Len(t, reqs, 2, "physical requests at the server")
	require.GreaterOrEqual(t, reqs[1].Arrived.Sub(reqs[0].Arrived), time.Second, "the retry waited for Retry-After")

	retry := faultsFind[keel.ProviderRequestRetry](t, events)
	require.Len(t, retry, 1)
	require.Equal(t, keel.ProviderRateLimited, retry[0].Kind)
	require.Equal(t, http.StatusTooManyRequests, retry[0].Status)
	require.Equal(t, keel.Duration(time.Second), *retry[0].RetryAfter)
	require.Equal(t, keel.Duration(time.Second), retry[0].Delay)
	reset := faultsFind[keel.ProviderStreamReset](t, events)
	require.Equal(t, keel.ResetReason{Kind: keel.ResetRetryableFailure, Failure: keel.ProviderRateLimited,
		RetryAfter: retry[0].RetryAfter}, reset[0].Reason)

	// Usage: two physical requests in the total, the success alone in Usage.
	usage := faultsFind[keel.UsageUpdated](t, events)
	require.Len(t, usage, 2)
	require.Equal(t, keel.Usage{Requests: 1}, usage[0].Usage, "the 429 billed no tokens")
	require.Equal(t, 2, out.UsageTotal.Requests)
	require.Equal(t, usage[0].Usage.Add(usage[1].Usage), out.UsageTotal)
	require.Equal(t, usage[1].Usage, out.Usage)
	require.Equal(t, int64(25), out.Usage.InputTokens)
	require.Equal(t, int64(4), out.Usage.OutputTokens)
}

// A stream chunk that is not JSON is a malformed response: the contract
// retries it at once, so a good second stream completes the run.
func TestFaultsOpenAIBadChunkRetriedE2E(t *testing.T) {
	hs := providertest.NewServer(t,
		providertest.SSE(t, faultsFixture("bad_chunk.sse")), providertest.SSE(t, faultsFixture("text.sse")))
	out, err, events := faultsOpenAIRun(t, hs, "faults-openai-bad-chunk")
	require.NoError(t, err, "events: %v", types(events))
	require.Equal(t, "Hello, world!", out.Text)
	require.Len(t, hs.Requests(), 2)
	want := []string{keel.TypeRunStarted, keel.TypeStepStarted,
		keel.TypeUsageUpdated, keel.TypeProviderStreamReset,
		keel.TypeUsageUpdated, keel.TypeModelCallCompleted, keel.TypeRunCompleted}
	if diff := cmp.Diff(want, types(events)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
}

// A worker that stops (a deploy: SIGTERM, drain, exit) while a model turn
// streams abandons that attempt; the run must go on on another worker, as
// after a crash, not fail.
func TestFaultsWorkerStopMidStreamE2E(t *testing.T) {
	p := scriptedFaults(t, `{"turns":[{"failures":[{"kind":"hang","after_chunks":2}],
	  "text":["Hel","lo"," world"],"usage":{"input_tokens":10,"output_tokens":5}}]}`)
	srv := keeltest.StartServer(t, devserver.Config{})
	first := keeltest.StartWorker(t, srv, keeltest.WorkerOptions{Models: p})
	c := keeltest.Client(t, srv, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	run, err := c.Session("faults-worker-stop").Send(ctx, "go")
	require.NoError(t, err)
	p.awaitTexts(t, ctx, 2)
	// The stream hangs; the worker drains for its stop timeout, then
	// cancels the activity and exits. Another worker takes over.
	first.Stop()
	keeltest.StartWorker(t, srv, keeltest.WorkerOptions{Models: p})

	// A retry takes a second (or the 15 s heartbeat timeout if the stopped
	// worker never reported); a run that has not ended long after is stuck.
	octx, ocancel := context.WithTimeout(ctx, 45*time.Second)
	defer ocancel()
	out, err := run.Outcome(octx)
	tc := keeltest.Dial(t, srv)
	if octx.Err() != nil {
		// The run executes in its session's workflow (an inline session).
		d, derr := tc.DescribeWorkflowExecution(ctx, run.Session().ID(), "")
		require.NoError(t, derr)
		t.Fatalf("the run did not end; its pending workflow task: %v", d.GetPendingWorkflowTask())
	}
	// The run's events as the session committed them: there is no Run
	// workflow whose result would hold them.
	events, lerr := run.Session().EventsAfter(ctx, 0)
	require.NoError(t, lerr)
	require.NoError(t, err, "events: %v", types(events))
	requireSessionLog(t, events)
	require.Equal(t, "Hello world", out.Text)
	require.Equal(t, int32(2), p.requests.Load())
	require.Equal(t, 2, out.UsageTotal.Requests)
	require.Len(t, faultsFind[keel.ProviderStreamReset](t, events), 1, "the abandoned attempt is reset")
}
