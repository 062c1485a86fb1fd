package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/provider"
	"github.com/keelrun/keel/server/provider/scripted"
)

// faultCounter counts the physical requests a provider is asked for, so the
// matrix checks the workflow's own count (usage.updated, UsageTotal)
// against what really reached the provider.
type faultCounter struct {
	provider.Provider
	n atomic.Int32
}

func (c *faultCounter) Stream(ctx context.Context, req provider.Request) iter.Seq2[provider.Chunk, error] {
	c.n.Add(1)
	return c.Provider.Stream(ctx, req)
}

// faultEnv is a session test environment whose provider is counted.
type faultEnv struct {
	*runEnv
	calls *faultCounter
}

func newFaultEnv(t *testing.T, script string) *faultEnv {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	// Injected failures make the SDK log every failed attempt as an error;
	// the assertions say what matters, so -v prints the matrix, not noise.
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	calls := &faultCounter{Provider: scripted.New(parseScript(t, script))}
	env := &faultEnv{runEnv: newEnvOf(t, &suite, calls), calls: calls}
	env.acts.Segments = &memSegments{}
	// Every path is priced, so every terminal event carries what the run
	// spent (docs/contract.md §20.2).
	env.acts.Policy.Prices = map[string]keel.Price{"scripted:test": testPrice}
	return env
}

// faultEvents spells event sequences in the matrix with short words.
var faultEvents = map[string]string{
	"started":   keel.TypeRunStarted,
	"step":      keel.TypeStepStarted,
	"usage":     keel.TypeUsageUpdated,
	"reset":     keel.TypeProviderStreamReset,
	"retry":     keel.TypeProviderRetry,
	"call":      keel.TypeModelCallCompleted,
	"completed": keel.TypeRunCompleted,
	"failed":    keel.TypeRunFailed,
	"cancelled": keel.TypeRunCancelled,
}

func faultSeq(t *testing.T, words string) []string {
	t.Helper()
	var out []string
	for _, w := range strings.Fields(words) {
		typ, ok := faultEvents[w]
		require.True(t, ok, "unknown event word %q", w)
		out = append(out, typ)
	}
	return out
}

// faultUsage is the token part of a usage (Requests is checked apart).
func faultUsage(in, out int64) keel.Usage { return keel.Usage{InputTokens: in, OutputTokens: out} }

// The successful attempt of every matrix case streams "Hel", "lo" and
// reports faultOK. Stream faults that get as far as the usage chunk report
// faultBad, billed all the same.
var (
	faultOK  = faultUsage(10, 5)
	faultBad = faultUsage(7, 3)
)

const faultTurn = `"text":["Hel","lo"],"usage":{"input_tokens":10,"output_tokens":5}`

// faultCase is one row of the fault matrix: the failures injected into the
// first attempts of a one-turn run, and everything the run must show.
type faultCase struct {
	name     string
	failures string // JSON array of scripted.Failure
	// requests is the number of physical provider requests.
	requests int
	// waits are the workflow-clock gaps between consecutive requests.
	waits []time.Duration
	// retries are the provider.request_retry events (Kind, Status,
	// RetryAfter, Delay; Step, Attempt and Message are not compared).
	retries []keel.ProviderRequestRetry
	// resets are the reasons of provider.stream_reset, in order (Detail is
	// only checked to be present for malformed resets).
	resets []keel.ResetReason
	// usage is what each physical request reported, in order.
	usage  []keel.Usage
	events string
	// The outcome.
	status    keel.RunStatus
	code      keel.Code
	retryable bool
	sentinel  error                  // errors.Is target for failures
	kind      keel.ProviderErrorKind // errors.As *keel.ProviderError; "" when none
	httpCode  int
	// partial is the aborted assistant text a failed run keeps.
	partial string
}

func dur(d time.Duration) *keel.Duration { k := keel.Duration(d); return &k }

func retryOf(kind keel.ProviderErrorKind, status int, hint time.Duration, delay time.Duration) keel.ProviderRequestRetry {
	r := keel.ProviderRequestRetry{Kind: kind, Status: status, Delay: keel.Duration(delay)}
	if hint > 0 {
		r.RetryAfter = dur(hint)
	}
	return r
}

func resetRetryable(kind keel.ProviderErrorKind, hint time.Duration) keel.ResetReason {
	r := keel.ResetReason{Kind: keel.ResetRetryableFailure, Failure: kind}
	if hint > 0 {
		r.RetryAfter = dur(hint)
	}
	return r
}

var resetMalformed = keel.ResetReason{Kind: keel.ResetMalformed}

var none = faultUsage(0, 0)

var faultMatrix = []faultCase{
	{
		name:     "429 Retry-After 0",
		failures: `[{"kind":"rate_limited","status":429,"retry_after":"0s"}]`,
		requests: 2, waits: []time.Duration{time.Second},
		retries: []keel.ProviderRequestRetry{retryOf(keel.ProviderRateLimited, 429, 0, time.Second)},
		resets:  []keel.ResetReason{resetRetryable(keel.ProviderRateLimited, 0)},
		usage:   []keel.Usage{none, faultOK},
		events:  "started step usage reset retry usage call completed",
		status:  keel.StatusCompleted,
	},
	{
		name:     "429 Retry-After 3s",
		failures: `[{"kind":"rate_limited","status":429,"retry_after":"3s"}]`,
		requests: 2, waits: []time.Duration{3 * time.Second},
		retries: []keel.ProviderRequestRetry{retryOf(keel.ProviderRateLimited, 429, 3*time.Second, 3*time.Second)},
		resets:  []keel.ResetReason{resetRetryable(keel.ProviderRateLimited, 3*time.Second)},
		usage:   []keel.Usage{none, faultOK},
		events:  "started step usage reset retry usage call completed",
		status:  keel.StatusCompleted,
	},
	{
		name:     "429 Retry-After 120s (capped at 60s)",
		failures: `[{"kind":"rate_limited","status":429,"retry_after":"120s"}]`,
		requests: 2, waits: []time.Duration{60 * time.Second},
		// The event keeps the provider's hint; the delay is capped.
		retries: []keel.ProviderRequestRetry{retryOf(keel.ProviderRateLimited, 429, 120*time.Second, 60*time.Second)},
		resets:  []keel.ResetReason{resetRetryable(keel.ProviderRateLimited, 120*time.Second)},
		usage:   []keel.Usage{none, faultOK},
		events:  "started step usage reset retry usage call completed",
		status:  keel.StatusCompleted,
	},
	{
		name:     "Retry-After below the backoff (attempt 3)",
		failures: `[{"kind":"server_error","status":500},{"kind":"server_error","status":500},{"kind":"rate_limited","status":429,"retry_after":"1s"}]`,
		requests: 4, waits: []time.Duration{time.Second, 2 * time.Second, 4 * time.Second},
		retries: []keel.ProviderRequestRetry{
			retryOf(keel.ProviderServer, 500, 0, time.Second),
			retryOf(keel.ProviderServer, 500, 0, 2*time.Second),
			retryOf(keel.ProviderRateLimited, 429, time.Second, 4*time.Second),
		},
		resets: []keel.ResetReason{
			resetRetryable(keel.ProviderServer, 0), resetRetryable(keel.ProviderServer, 0),
			resetRetryable(keel.ProviderRateLimited, time.Second),
		},
		usage:  []keel.Usage{none, none, none, faultOK},
		events: "started step usage reset retry usage reset retry usage reset retry usage call completed",
		status: keel.StatusCompleted,
	},
	{
		name:     "500",
		failures: `[{"kind":"server_error","status":500}]`,
		requests: 2, waits: []time.Duration{time.Second},
		retries: []keel.ProviderRequestRetry{retryOf(keel.ProviderServer, 500, 0, time.Second)},
		resets:  []keel.ResetReason{resetRetryable(keel.ProviderServer, 0)},
		usage:   []keel.Usage{none, faultOK},
		events:  "started step usage reset retry usage call completed",
		status:  keel.StatusCompleted,
	},
	{
		name:     "503",
		failures: `[{"kind":"overloaded","status":503}]`,
		requests: 2, waits: []time.Duration{time.Second},
		retries: []keel.ProviderRequestRetry{retryOf(keel.ProviderOverloaded, 503, 0, time.Second)},
		resets:  []keel.ResetReason{resetRetryable(keel.ProviderOverloaded, 0)},
		usage:   []keel.Usage{none, faultOK},
		events:  "started step usage reset retry usage call completed",
		status:  keel.StatusCompleted,
	},
	{
		name:     "400",
		failures: `[{"kind":"invalid_request","status":400}]`,
		requests: 1, usage: []keel.Usage{none},
		events: "started step usage failed",
		status: keel.StatusFailed, code: keel.CodeProvider, sentinel: keel.ErrProvider,
		kind: keel.ProviderInvalidRequest, httpCode: 400,
	},
	{
		name:     "401",
		failures: `[{"kind":"auth","status":401}]`,
		requests: 1, usage: []keel.Usage{none},
		events: "started step usage failed",
		status: keel.StatusFailed, code: keel.CodeProvider, sentinel: keel.ErrProvider,
		kind: keel.ProviderAuth, httpCode: 401,
	},
	{
		name:     "connection cut mid-stream",
		failures: `[{"kind":"stream_cut","after_chunks":1}]`,
		requests: 2, waits: []time.Duration{time.Second},
		retries: []keel.ProviderRequestRetry{retryOf(keel.ProviderStreamCut, 0, 0, time.Second)},
		resets:  []keel.ResetReason{resetRetryable(keel.ProviderStreamCut, 0)},
		// The cut comes before the usage chunk: nothing reported, one request.
		usage:  []keel.Usage{none, faultOK},
		events: "started step usage reset retry usage call completed",
		status: keel.StatusCompleted,
	},
	{
		name:     "malformed tool-call JSON once",
		failures: `[{"kind":"malformed","usage":{"input_tokens":7,"output_tokens":3}}]`,
		requests: 2, waits: []time.Duration{0},
		resets: []keel.ResetReason{resetMalformed},
		usage:  []keel.Usage{faultBad, faultOK},
		events: "started step usage reset usage call completed",
		status: keel.StatusCompleted,
	},
	{
		name:     "malformed tool-call JSON twice",
		failures: `[{"kind":"malformed","usage":{"input_tokens":7,"output_tokens":3}},{"kind":"malformed","usage":{"input_tokens":7,"output_tokens":3}}]`,
		requests: 3, waits: []time.Duration{0, 0},
		resets: []keel.ResetReason{resetMalformed, resetMalformed},
		usage:  []keel.Usage{faultBad, faultBad, faultOK},
		events: "started step usage reset usage reset usage call completed",
		status: keel.StatusCompleted,
	},
	{
		name:     "malformed tool-call JSON three times",
		failures: `[{"kind":"malformed","usage":{"input_tokens":7,"output_tokens":3}},{"kind":"malformed","usage":{"input_tokens":7,"output_tokens":3}},{"kind":"malformed","usage":{"input_tokens":7,"output_tokens":3}}]`,
		requests: 3, waits: []time.Duration{0, 0},
		resets: []keel.ResetReason{resetMalformed, resetMalformed},
		usage:  []keel.Usage{faultBad, faultBad, faultBad},
		events: "started step usage reset usage reset usage failed",
		status: keel.StatusFailed, code: keel.CodeMalformedResponse, sentinel: keel.ErrMalformedResponse,
		kind:    keel.ProviderMalformed,
		partial: "Hello",
	},
	{
		name:     "empty stream",
		failures: `[{"kind":"empty","usage":{"input_tokens":7,"output_tokens":3}}]`,
		requests: 2, waits: []time.Duration{0},
		resets: []keel.ResetReason{resetMalformed},
		usage:  []keel.Usage{faultBad, faultOK},
		events: "started step usage reset usage call completed",
		status: keel.StatusCompleted,
	},
	{
		name:     "no finish reason",
		failures: `[{"kind":"no_finish","usage":{"input_tokens":7,"output_tokens":3}}]`,
		requests: 2, waits: []time.Duration{0},
		resets: []keel.ResetReason{resetMalformed},
		usage:  []keel.Usage{faultBad, faultOK},
		events: "started step usage reset usage call completed",
		status: keel.StatusCompleted,
	},
	{
		name:     "permanent after retryable stops at once",
		failures: `[{"kind":"rate_limited","status":429},{"kind":"invalid_request","status":400},{"kind":"server_error","status":500}]`,
		requests: 2, waits: []time.Duration{time.Second},
		retries: []keel.ProviderRequestRetry{retryOf(keel.ProviderRateLimited, 429, 0, time.Second)},
		resets:  []keel.ResetReason{resetRetryable(keel.ProviderRateLimited, 0)},
		usage:   []keel.Usage{none, none},
		events:  "started step usage reset retry usage failed",
		status:  keel.StatusFailed, code: keel.CodeProvider, sentinel: keel.ErrProvider,
		kind: keel.ProviderInvalidRequest, httpCode: 400,
	},
	{
		name:     "4 retryable failures exhaust the budget",
		failures: `[{"kind":"server_error","status":500},{"kind":"server_error","status":500},{"kind":"server_error","status":500},{"kind":"server_error","status":500}]`,
		requests: 4, waits: []time.Duration{time.Second, 2 * time.Second, 4 * time.Second},
		retries: []keel.ProviderRequestRetry{
			retryOf(keel.ProviderServer, 500, 0, time.Second),
			retryOf(keel.ProviderServer, 500, 0, 2*time.Second),
			retryOf(keel.ProviderServer, 500, 0, 4*time.Second),
		},
		resets: []keel.ResetReason{
			resetRetryable(keel.ProviderServer, 0), resetRetryable(keel.ProviderServer, 0), resetRetryable(keel.ProviderServer, 0),
		},
		usage:  []keel.Usage{none, none, none, none},
		events: "started step usage reset retry usage reset retry usage reset retry usage failed",
		status: keel.StatusFailed, code: keel.CodeProvider, retryable: true, sentinel: keel.ErrProvider,
		kind: keel.ProviderServer, httpCode: 500,
	},
	{
		// Malformed responses and retryable failures share the 4-request
		// budget; the backoff follows the physical attempt number.
		name:     "malformed and retryable share the budget",
		failures: `[{"kind":"malformed"},{"kind":"overloaded","status":503},{"kind":"malformed"},{"kind":"server_error","status":500}]`,
		requests: 4, waits: []time.Duration{0, 2 * time.Second, 0},
		retries: []keel.ProviderRequestRetry{retryOf(keel.ProviderOverloaded, 503, 0, 2*time.Second)},
		resets:  []keel.ResetReason{resetMalformed, resetRetryable(keel.ProviderOverloaded, 0), resetMalformed},
		usage:   []keel.Usage{faultOK, none, faultOK, none},
		events:  "started step usage reset usage reset retry usage reset usage failed",
		status:  keel.StatusFailed, code: keel.CodeProvider, retryable: true, sentinel: keel.ErrProvider,
		kind: keel.ProviderServer, httpCode: 500, partial: "",
	},
	{
		name:     "stream cut on every attempt keeps the last partial",
		failures: `[{"kind":"stream_cut","after_chunks":1},{"kind":"stream_cut","after_chunks":1},{"kind":"stream_cut","after_chunks":1},{"kind":"stream_cut","after_chunks":1}]`,
		requests: 4, waits: []time.Duration{time.Second, 2 * time.Second, 4 * time.Second},
		retries: []keel.ProviderRequestRetry{
			retryOf(keel.ProviderStreamCut, 0, 0, time.Second),
			retryOf(keel.ProviderStreamCut, 0, 0, 2*time.Second),
			retryOf(keel.ProviderStreamCut, 0, 0, 4*time.Second),
		},
		resets: []keel.ResetReason{
			resetRetryable(keel.ProviderStreamCut, 0), resetRetryable(keel.ProviderStreamCut, 0), resetRetryable(keel.ProviderStreamCut, 0),
		},
		usage:  []keel.Usage{none, none, none, none},
		events: "started step usage reset retry usage reset retry usage reset retry usage failed",
		status: keel.StatusFailed, code: keel.CodeProvider, retryable: true, sentinel: keel.ErrProvider,
		kind: keel.ProviderStreamCut, partial: "Hel",
	},
}

// faultRow is one printed line of the matrix.
type faultRow struct {
	name, requests, waits, outcome string
}

// TestFaultMatrix injects each fault of the retry contract into the first
// attempts of a one-turn run and checks the physical requests, the waits
// between them on the workflow clock, the durable events in order, the
// usage and the typed outcome. Run with -v to print the matrix.
func TestFaultMatrix(t *testing.T) {
	var rows []faultRow
	for _, tc := range faultMatrix {
		t.Run(tc.name, func(t *testing.T) {
			env := newFaultEnv(t, `{"turns":[{"failures":`+tc.failures+`,`+faultTurn+`}]}`)
			res := env.execSession(t, promptOf("go"))
			waits := checkFaultCase(t, tc, env, res)
			// The row shows what was measured (it equals the case's
			// expectation once the checks passed).
			rows = append(rows, faultRow{tc.name, fmt.Sprint(res.Outcome.UsageTotal.Requests), faultWaits(waits), faultOutcome(res.Outcome)})
		})
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "| case\t| requests\t| waits\t| outcome\t|")
	fmt.Fprintln(tw, "|---\t|---\t|---\t|---\t|")
	for _, r := range rows {
		fmt.Fprintf(tw, "| %s\t| %s\t| %s\t| %s\t|\n", r.name, r.requests, r.waits, r.outcome)
	}
	require.NoError(t, tw.Flush())
	t.Log("fault matrix:\n" + b.String())
}

// checkFaultCase checks one case and returns the measured waits.
func checkFaultCase(t *testing.T, tc faultCase, env *faultEnv, res sessionRun) []time.Duration {
	// The exact event sequence.
	if diff := cmp.Diff(faultSeq(t, tc.events), types(res.Events)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}

	// Physical requests, three ways: at the provider, one usage.updated
	// each, and the outcome's total.
	usage := find[keel.UsageUpdated](t, res.Events)
	require.Equal(t, tc.requests, int(env.calls.n.Load()), "requests the provider saw")
	require.Len(t, usage, tc.requests, "usage.updated events")
	require.Equal(t, tc.requests, res.Outcome.UsageTotal.Requests, "Outcome.UsageTotal.Requests")

	// Usage: each physical request as reported (abandoned ones included),
	// a running total that is the sum so far, and an outcome total that is
	// the sum over all of them, each priced (docs/contract.md §20).
	// Outcome.Usage holds the success only.
	var sum keel.Usage
	for i, u := range usage {
		want := tc.usage[i]
		want.Requests = 1
		want.Cost = keel.Costs{testPrice.Cost(want)}
		require.Equal(t, want, u.Usage, "usage of request %d, priced", i+1)
		require.Equal(t, i+1, u.Attempt)
		sum = sum.Add(u.Usage)
		require.Equal(t, sum, u.Total, "running total after request %d", i+1)
	}
	require.Equal(t, sum, res.Outcome.UsageTotal)
	if tc.status == keel.StatusCompleted {
		ok := faultOK
		ok.Requests = 1
		ok.Cost = keel.Costs{testPrice.Cost(ok)}
		require.Equal(t, ok, res.Outcome.Usage)
		done := find[keel.RunCompleted](t, res.Events)
		require.Equal(t, ok, done[0].Usage)
	} else {
		require.Zero(t, res.Outcome.Usage, "a failed run had no successful response")
	}

	// Waits on the workflow clock: activities take no workflow time in the
	// test environment, so the gap between the usage.updated of consecutive
	// requests is exactly the wait between them.
	stepAt, _ := at(res.Events, keel.TypeStepStarted, 0)
	firstAt, _ := at(res.Events, keel.TypeUsageUpdated, 0)
	require.Equal(t, stepAt, firstAt, "the first request starts without waiting")
	var gaps []time.Duration
	for i, from := 1, 0; i < tc.requests; i++ {
		prev, p := at(res.Events, keel.TypeUsageUpdated, from)
		next, n := at(res.Events, keel.TypeUsageUpdated, p+1)
		gaps = append(gaps, next.Sub(prev))
		from = n
	}
	require.Equal(t, tc.waits, gaps, "workflow-clock waits between requests")

	// The announced delays agree with the measured waits: each retry event
	// is followed by the next request exactly Delay later.
	retries := find[keel.ProviderRequestRetry](t, res.Events)
	require.Len(t, retries, len(tc.retries))
	for i, r := range retries {
		want := tc.retries[i]
		require.Equal(t, want.Kind, r.Kind, "retry %d kind", i+1)
		require.Equal(t, want.Status, r.Status, "retry %d status", i+1)
		require.Equal(t, want.RetryAfter, r.RetryAfter, "retry %d retry_after", i+1)
		require.Equal(t, want.Delay, r.Delay, "retry %d delay", i+1)
		require.Equal(t, 1, r.Step)
	}
	for i, from := 0, 0; i < len(retries); i++ {
		retryAt, ri := at(res.Events, keel.TypeProviderRetry, from)
		nextAt, _ := at(res.Events, keel.TypeUsageUpdated, ri)
		require.Equal(t, retries[i].Delay.Std(), nextAt.Sub(retryAt), "retry %d: announced delay vs clock", i+1)
		from = ri + 1
	}

	// Every retry is announced by a stream reset with its reason, and the
	// reset names the attempt it abandons.
	resets := find[keel.ProviderStreamReset](t, res.Events)
	require.Len(t, resets, len(tc.resets))
	for i, r := range resets {
		want := tc.resets[i]
		if want.Kind == keel.ResetMalformed {
			require.NotEmpty(t, r.Reason.Detail, "malformed reset %d says why", i+1)
			want.Detail = r.Reason.Detail
		}
		require.Equal(t, want, r.Reason, "reset %d", i+1)
		require.Equal(t, usage[i].Attempt, r.Attempt, "reset %d abandons the attempt before it", i+1)
	}

	// The outcome.
	out := res.Outcome
	require.Equal(t, tc.status, out.Status)
	require.Equal(t, int64(1), out.Revision)
	msgs := []keel.Message{keel.UserMessage("go")}
	if tc.partial != "" {
		msgs = append(msgs, keel.Message{Role: keel.RoleAssistant, Content: tc.partial, Aborted: true})
	}
	if tc.status == keel.StatusCompleted {
		require.NoError(t, out.Err())
		require.Equal(t, "Hello", out.Text)
		msgs = append(msgs, keel.Message{Role: keel.RoleAssistant, Content: "Hello"})
		calls := find[keel.ModelCallCompleted](t, res.Events)
		require.Equal(t, tc.requests, calls[0].Attempt, "the successful attempt")
	} else {
		err := out.Err()
		require.ErrorIs(t, err, tc.sentinel)
		require.NotErrorIs(t, err, keel.ErrCancelled)
		var ke *keel.Error
		require.True(t, errors.As(err, &ke))
		require.Equal(t, tc.code, ke.Code)
		require.Equal(t, tc.retryable, ke.Retryable)
		failed := find[keel.RunFailed](t, res.Events)
		require.Equal(t, keel.RunFailed{Code: tc.code, Message: ke.Message, Retryable: tc.retryable, Revision: 1,
			UsageTotal: &out.UsageTotal}, failed[0], "the terminal event carries what the run spent")
		var pe *keel.ProviderError
		if tc.kind == "" {
			require.False(t, errors.As(err, &pe), "no provider error behind %v", err)
		} else {
			require.True(t, errors.As(err, &pe), "a *keel.ProviderError behind %v", err)
			require.Equal(t, tc.kind, pe.Kind)
			require.Equal(t, tc.httpCode, pe.Status)
			require.Equal(t, tc.retryable, pe.Retryable)
		}
	}
	if diff := cmp.Diff(msgs, res.Messages); diff != "" {
		t.Fatalf("messages (-want +got):\n%s", diff)
	}
	return gaps
}

func faultWaits(ws []time.Duration) string {
	if len(ws) == 0 {
		return "-"
	}
	s := make([]string, len(ws))
	for i, w := range ws {
		s[i] = fmt.Sprintf("%gs", w.Seconds())
	}
	return strings.Join(s, ", ")
}

func faultOutcome(o keel.Outcome) string {
	if o.Status != keel.StatusFailed || o.Error == nil {
		return string(o.Status)
	}
	s := "failed " + string(o.Error.Code)
	if o.Error.Provider != nil {
		s += " " + string(o.Error.Provider.Kind)
	}
	if o.Error.Retryable {
		return s + " (retryable)"
	}
	return s + " (permanent)"
}

// faultCancelBound is how long, on the workflow clock, a cancelled run may
// take from the cancel to run.cancelled.
const faultCancelBound = time.Second

// A cancel during a retry wait ends the run at once: the durable timer is
// cancelled, no further request is made, and the run ends cancelled long
// before the 60 s the provider asked for.
func TestCancelDuringRetryWait(t *testing.T) {
	for _, how := range []string{"signal", "temporal cancel"} {
		t.Run(how, func(t *testing.T) {
			env := newFaultEnv(t, `{"turns":[{"failures":[{"kind":"rate_limited","status":429,"retry_after":"60s"}],`+faultTurn+`}]}`)
			var cancelAt time.Time
			// Cancel 10 s into the 60 s wait, measured from the moment the
			// workflow starts the retry timer.
			env.SetOnTimerScheduledListener(func(_ string, d time.Duration) {
				if d != 60*time.Second {
					return
				}
				env.RegisterDelayedCallback(func() {
					cancelAt = env.Now()
					if how == "signal" {
						env.SignalWorkflow(api.SignalCancel, nil)
					} else {
						env.CancelWorkflow()
					}
				}, 10*time.Second)
			})
			res := env.execSession(t, promptOf("go"))

			if diff := cmp.Diff(faultSeq(t, "started step usage reset retry cancelled"), types(res.Events)); diff != "" {
				t.Fatalf("events (-want +got):\n%s", diff)
			}
			require.False(t, cancelAt.IsZero(), "the cancel was sent")
			retryAt, _ := at(res.Events, keel.TypeProviderRetry, 0)
			cancelledAt, _ := at(res.Events, keel.TypeRunCancelled, 0)
			require.Equal(t, 10*time.Second, cancelAt.Sub(retryAt), "cancelled inside the wait")
			require.Less(t, cancelledAt.Sub(cancelAt), faultCancelBound, "cancel to run.cancelled")

			require.Equal(t, int32(1), env.calls.n.Load(), "no request after the cancel")
			require.Equal(t, 1, res.Outcome.UsageTotal.Requests)
			require.Equal(t, &res.Outcome.UsageTotal, find[keel.RunCancelled](t, res.Events)[0].UsageTotal,
				"run.cancelled carries what the run spent (docs/contract.md §20.2)")
			require.Equal(t, keel.StatusCancelled, res.Outcome.Status)
			require.ErrorIs(t, res.Outcome.Err(), keel.ErrCancelled)
			require.Equal(t, int64(1), res.Outcome.Revision)
			require.Equal(t, []keel.Message{keel.UserMessage("go")}, res.Messages)
		})
	}
}

// A cancel while the provider stream hangs after two chunks reaches the
// activity and ends the run cancelled, with no further attempt.
func TestCancelDuringStream(t *testing.T) {
	env := newFaultEnv(t, `{"turns":[{"failures":[{"kind":"hang","after_chunks":2,"usage":{"input_tokens":7,"output_tokens":1}}],
	  "text":["Hel","lo"," world"],"usage":{"input_tokens":10,"output_tokens":5}}]}`)
	// Cancel once both chunks were streamed: the live channel shows them.
	sub, err := env.live.Subscribe(context.Background(), "s1", live.SubscribeOptions{})
	require.NoError(t, err)
	defer sub.Close()
	var cancelAt atomic.Pointer[time.Time]
	go func() {
		texts := 0
		for texts < 2 {
			ev, err := sub.Next(context.Background())
			if err != nil {
				return
			}
			if ev.Type == keel.TypeTextDelta {
				texts++
			}
		}
		now := env.Now()
		cancelAt.Store(&now)
		env.SignalWorkflow(api.SignalCancel, nil)
	}()
	res := env.execSession(t, promptOf("go"))

	if diff := cmp.Diff(faultSeq(t, "started step usage cancelled"), types(res.Events)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	require.NotNil(t, cancelAt.Load(), "the cancel was sent")
	cancelledAt, _ := at(res.Events, keel.TypeRunCancelled, 0)
	require.Less(t, cancelledAt.Sub(*cancelAt.Load()), faultCancelBound, "cancel to run.cancelled")

	require.Equal(t, int32(1), env.calls.n.Load(), "no request after the cancel")
	require.Equal(t, 1, res.Outcome.UsageTotal.Requests)
	require.Equal(t, keel.StatusCancelled, res.Outcome.Status)
	require.ErrorIs(t, res.Outcome.Err(), keel.ErrCancelled)
	// The partial text ("Hello") comes back as the details of the
	// activity's CanceledError, which the test environment cannot carry: it
	// resolves a cancelled activity at once with a bare CanceledError,
	// WaitForCancellation or not. server/e2e/cancel_test.go proves the aborted
	// assistant message on a real server.
	require.Equal(t, keel.UserMessage("go"), res.Messages[0])
}

// A worker that stops mid-turn (a deploy) cancels the ModelTurn activity
// without the run asking. What reaches the workflow then is not a
// requested cancellation: the SDK reports the activity failed, either with
// the activity's CanceledError wrapped ("unexpected activity cancel
// error") or with a bare "context canceled". Both were seen on the
// embedded server (e2e TestFaultsWorkerStopMidStreamE2E). Either way the
// attempt is abandoned by the worker, not refused by the provider: the
// turn must be retried, as after a crash (worker_lost), and the run must
// end with one terminal event.
func TestFaultWorkerStopIsRetried(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"CanceledError the run did not ask for", temporal.NewCanceledError(activities.TurnFailure{
			Usage: keel.Usage{Requests: 1}, Partial: "Hel"})},
		{"bare context.Canceled", context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newFaultEnv(t, `{"turns":[{`+faultTurn+`}]}`)
			real := &activities.Activities{Models: scriptModels{env.calls}}
			// Every attempt runs the real activity (one worker, so its
			// transcript cache serves the retry); the first one's worker then
			// "stops" and reports tc.err instead of the response.
			env.OnActivity(activities.ModelTurnName, mock.Anything, mock.Anything).Return(
				func(ctx context.Context, in activities.ModelTurnInput) (*activities.ModelTurnResult, error) {
					res, err := real.ModelTurn(ctx, in)
					if in.Attempt == 1 {
						return nil, tc.err
					}
					return res, err
				})
			// The session's workflow itself must not fail: it continues
			// as new with the run committed.
			res := env.execSession(t, promptOf("go"))
			if diff := cmp.Diff(faultSeq(t, "started step usage reset retry usage call completed"), types(res.Events)); diff != "" {
				t.Fatalf("events (-want +got):\n%s", diff)
			}
			retry := find[keel.ProviderRequestRetry](t, res.Events)
			require.True(t, retry[0].Kind.Retryable(), "retried as %s", retry[0].Kind)
			require.Equal(t, keel.StatusCompleted, res.Outcome.Status)
			require.Equal(t, 2, res.Outcome.UsageTotal.Requests)
		})
	}
}
