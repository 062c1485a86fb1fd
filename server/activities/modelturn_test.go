package activities_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/provider"
	"github.com/keelrun/keel/server/provider/anthropic"
	"github.com/keelrun/keel/server/provider/openai"
	"github.com/keelrun/keel/server/provider/providertest"
)

// messagesOf returns the "role: content" of the chat messages of request i
// (OpenAI's wire format).
func messagesOf(t *testing.T, srv *providertest.Server, i int) []string {
	t.Helper()
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(srv.Requests()[i].Body, &req))
	var out []string
	for _, m := range req.Messages {
		c, _ := m.Content.(string)
		out = append(out, m.Role+": "+c)
	}
	return out
}

// testdata is the path of a fixture of a provider's tests.
func testdata(backend, name string) string {
	return filepath.Join("..", "provider", backend, "testdata", name)
}

// fixedModels resolves every spec to one provider.
type fixedModels struct{ p provider.Provider }

func (m fixedModels) Resolve(string) (provider.Provider, string, error) {
	return m.p, "test-model", nil
}

const turnKey = "sk-test-SECRET-1234567890"

func backendFor(t *testing.T, backend, url string) provider.Provider {
	t.Helper()
	switch backend {
	case openai.Name:
		p, err := openai.New(openai.Config{BaseURL: url, APIKey: turnKey})
		require.NoError(t, err)
		return p
	case anthropic.Name:
		p, err := anthropic.New(anthropic.Config{BaseURL: url, APIKey: turnKey})
		require.NoError(t, err)
		return p
	}
	t.Fatalf("no backend %q", backend)
	return nil
}

func newTurnEnv(acts *activities.Activities) *testsuite.TestActivityEnvironment {
	var suite testsuite.WorkflowTestSuite
	// Failed attempts are the point of these tests; the SDK's error logs
	// about them are noise.
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivityWithOptions(acts.ModelTurn, activity.RegisterOptions{Name: activities.ModelTurnName})
	return env
}

// turnInput is attempt 1 of step 1 of run s1/run-1 over the given
// transcript, all of it sent as the tail.
func turnInput(msgs ...keel.Message) activities.ModelTurnInput {
	return activities.ModelTurnInput{
		SessionID: "s1", RunID: "s1/run-1", Step: 1, Attempt: 1, Model: "test:model",
		Transcript: activities.TranscriptRef{WorkflowID: "s1/run-1", RunID: "exec-1", Len: len(msgs)},
		Tail:       msgs, AfterSeq: 3,
	}
}

// runTurn runs one ModelTurn activity against backend served by srv.
func runTurn(t *testing.T, backend string, srv *providertest.Server, in activities.ModelTurnInput) (*activities.ModelTurnResult, error) {
	t.Helper()
	env := newTurnEnv(&activities.Activities{Models: fixedModels{backendFor(t, backend, srv.URL)}})
	v, err := env.ExecuteActivity(activities.ModelTurnName, in)
	if err != nil {
		return nil, err
	}
	var res activities.ModelTurnResult
	require.NoError(t, v.Get(&res))
	return &res, nil
}

// turnFailure reads a failed attempt the way the session workflow does: an
// ApplicationError whose type is the keel code and whose detail is the
// TurnFailure. Temporal must not retry it: the workflow owns retries.
func turnFailure(t *testing.T, err error, code keel.Code) activities.TurnFailure {
	t.Helper()
	require.Error(t, err)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "want an ApplicationError, got %T: %v", err, err)
	require.Equal(t, string(code), appErr.Type(), "error type of %v", err)
	require.True(t, appErr.NonRetryable(), "the workflow owns retries")
	var f activities.TurnFailure
	require.NoError(t, appErr.Details(&f))
	return f
}

// HTTP failures of the real wire formats come back classified, with the
// Retry-After hint, from exactly one request (the SDKs' retries are off).
func TestModelTurnHTTPFailures(t *testing.T) {
	cases := []struct {
		backend   string
		status    int
		header    http.Header
		fixture   string
		kind      keel.ProviderErrorKind
		retryable bool
		hint      time.Duration
	}{
		{openai.Name, 429, http.Header{"Retry-After": {"7"}}, "error_429.json", keel.ProviderRateLimited, true, 7 * time.Second},
		{openai.Name, 500, nil, "error_500.json", keel.ProviderServer, true, 0},
		{openai.Name, 503, http.Header{"Retry-After": {"2"}}, "error_503.json", keel.ProviderOverloaded, true, 2 * time.Second},
		{openai.Name, 400, nil, "error_400.json", keel.ProviderInvalidRequest, false, 0},
		{openai.Name, 401, nil, "error_401.json", keel.ProviderAuth, false, 0},
		{anthropic.Name, 429, http.Header{"Retry-After": {"12"}}, "error_429.json", keel.ProviderRateLimited, true, 12 * time.Second},
		{anthropic.Name, 529, nil, "error_529.json", keel.ProviderOverloaded, true, 0},
		{anthropic.Name, 401, nil, "error_401.json", keel.ProviderAuth, false, 0},
	}
	for _, tc := range cases {
		t.Run(tc.backend+"/"+strconv.Itoa(tc.status), func(t *testing.T) {
			srv := providertest.NewServer(t, providertest.Error(t, tc.status, tc.header, testdata(tc.backend, tc.fixture)))
			_, err := runTurn(t, tc.backend, srv, turnInput(keel.UserMessage("hi")))
			f := turnFailure(t, err, keel.CodeProvider)
			require.NotNil(t, f.Provider)
			pe := *f.Provider
			require.Equal(t, tc.backend, pe.Provider)
			require.Equal(t, tc.kind, pe.Kind)
			require.Equal(t, tc.status, pe.Status)
			require.Equal(t, tc.retryable, pe.Retryable)
			require.Equal(t, keel.Duration(tc.hint), pe.RetryAfter)
			require.NotEmpty(t, pe.Message)
			require.NotContains(t, err.Error()+pe.Message, "SECRET", "error text is sanitized")
			require.Empty(t, f.Partial)
			require.Equal(t, keel.Usage{Requests: 1}, f.Usage)
			require.Equal(t, 1, srv.Count(), "one physical request per attempt")
		})
	}
}

// A connection dropped mid-stream is a retryable stream_cut that hands
// back the text and the usage reported before the cut.
func TestModelTurnStreamCutKeepsPartial(t *testing.T) {
	cases := []struct {
		backend string
		usage   keel.Usage
	}{
		// OpenAI reports usage only at the end: the cut loses it.
		{openai.Name, keel.Usage{Requests: 1}},
		// Anthropic reports input usage in message_start.
		{anthropic.Name, keel.Usage{InputTokens: 10, OutputTokens: 1, Requests: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.backend, func(t *testing.T) {
			srv := providertest.NewServer(t, providertest.SSE(t, testdata(tc.backend, "cut.sse")))
			_, err := runTurn(t, tc.backend, srv, turnInput(keel.UserMessage("hi")))
			f := turnFailure(t, err, keel.CodeProvider)
			require.NotNil(t, f.Provider)
			require.Equal(t, keel.ProviderStreamCut, f.Provider.Kind)
			require.True(t, f.Provider.Retryable)
			require.Equal(t, "The answer is", f.Partial)
			require.Equal(t, tc.usage, f.Usage)
		})
	}
}

// Unusable responses are keel.MalformedResponse, which the workflow
// retries at most twice, never a provider error.
func TestModelTurnMalformed(t *testing.T) {
	cases := []struct {
		backend, fixture, reason string
		usage                    keel.Usage
	}{
		{openai.Name, "malformed_tool.sse", "not JSON", keel.Usage{Requests: 1}},
		{anthropic.Name, "malformed_tool.sse", "not JSON", keel.Usage{InputTokens: 10, OutputTokens: 9, Requests: 1}},
		{openai.Name, "no_finish.sse", "finish reason", keel.Usage{InputTokens: 3, OutputTokens: 3, Requests: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.backend+"/"+tc.fixture, func(t *testing.T) {
			srv := providertest.NewServer(t, providertest.SSE(t, testdata(tc.backend, tc.fixture)))
			_, err := runTurn(t, tc.backend, srv, turnInput(keel.UserMessage("hi")))
			f := turnFailure(t, err, keel.CodeMalformedResponse)
			require.Nil(t, f.Provider)
			require.Contains(t, f.Malformed, tc.reason)
			require.Equal(t, tc.usage, f.Usage, "the abandoned attempt's usage is billed")
		})
	}
}

// A stream event that is not JSON is a malformed response too: the
// backends yield *provider.MalformedError for it, and the contract retries
// malformed responses.
func TestModelTurnBadChunkIsMalformed(t *testing.T) {
	for _, tc := range []struct{ backend, fixture string }{
		{openai.Name, "bad_chunk.sse"},
		{anthropic.Name, "bad_event.sse"},
	} {
		t.Run(tc.backend, func(t *testing.T) {
			srv := providertest.NewServer(t, providertest.SSE(t, testdata(tc.backend, tc.fixture)))
			_, err := runTurn(t, tc.backend, srv, turnInput(keel.UserMessage("hi")))
			f := turnFailure(t, err, keel.CodeMalformedResponse)
			require.Contains(t, f.Malformed, "not valid JSON")
		})
	}
}

// openaiChunk is one Chat Completions stream event with the given delta.
func openaiChunk(delta string, finish string) string {
	fin := "null"
	if finish != "" {
		fin = `"` + finish + `"`
	}
	return `data: {"id":"o1","object":"chat.completion.chunk","created":1767225600,"model":"gpt-test","choices":[{"index":0,"delta":` +
		delta + `,"finish_reason":` + fin + `}]}` + "\n\n"
}

// docs/contract.md §2.3: deltas reach the live channel in source arrival order,
// each carrying the run, the attempt and the last durable sequence before
// the turn (AfterSeq), so readers can merge them with durable events.
func TestModelTurnPublishesDeltasInOrder(t *testing.T) {
	srv := providertest.NewServer(t, providertest.SSEEvents(
		openaiChunk(`{"role":"assistant","reasoning_content":"Think"}`, ""),
		openaiChunk(`{"content":"A"}`, ""),
		openaiChunk(`{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"echo","arguments":"{\"te"}}]}`, ""),
		openaiChunk(`{"content":"B"}`, ""),
		openaiChunk(`{"tool_calls":[{"index":0,"function":{"arguments":"xt\":1}"}}]}`, ""),
		openaiChunk(`{"reasoning_content":"More"}`, ""),
		openaiChunk(`{}`, "tool_calls"),
		"data: [DONE]\n\n",
	))
	mem := live.NewMemory()
	t.Cleanup(func() { _ = mem.Close() })
	sub, err := mem.Subscribe(context.Background(), "s1", live.SubscribeOptions{})
	require.NoError(t, err)
	defer sub.Close()

	env := newTurnEnv(&activities.Activities{Models: fixedModels{backendFor(t, openai.Name, srv.URL)}, Live: mem})
	in := turnInput(keel.UserMessage("hi"))
	in.Step, in.Attempt, in.AfterSeq = 2, 3, 17
	v, err := env.ExecuteActivity(activities.ModelTurnName, in)
	require.NoError(t, err)
	var res activities.ModelTurnResult
	require.NoError(t, v.Get(&res))
	require.Equal(t, "AB", res.Response.Text)
	require.Equal(t, []keel.ToolCall{{ID: "c1", Name: "echo", Arguments: json.RawMessage(`{"text":1}`)}}, res.Response.ToolCalls)

	want := []keel.Event{
		keel.ReasoningDelta{Step: 2, Attempt: 3, Text: "Think"},
		keel.TextDelta{Step: 2, Attempt: 3, Text: "A"},
		keel.ToolCallDelta{Step: 2, Attempt: 3, Index: 0, ID: "c1", Name: "echo", Arguments: `{"te`},
		keel.TextDelta{Step: 2, Attempt: 3, Text: "B"},
		keel.ToolCallDelta{Step: 2, Attempt: 3, Index: 0, Arguments: `xt":1}`},
		keel.ReasoningDelta{Step: 2, Attempt: 3, Text: "More"},
	}
	// Publish happens before the activity returns, so every delta is
	// already buffered; the deadline only guards against a missing one.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var got []keel.Event
	for range want {
		env, err := sub.Next(ctx)
		require.NoError(t, err)
		require.False(t, env.Durable(), "deltas are ephemeral")
		require.Equal(t, int64(17), env.AfterSeq, "%s carries AfterSeq", env.Type)
		require.Equal(t, "s1", env.SessionID)
		require.Equal(t, "s1/run-1", env.RunID)
		ev, err := env.Event()
		require.NoError(t, err)
		got = append(got, ev)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("deltas (-want +got):\n%s", diff)
	}
}

var textStream = []string{
	openaiChunk(`{"role":"assistant","content":"ok"}`, ""),
	openaiChunk(`{}`, "stop"),
	"data: [DONE]\n\n",
}

// fakeRuns is a RunReader that serves one transcript and counts reads.
type fakeRuns struct {
	msgs []keel.Message
	mu   sync.Mutex
	refs []activities.TranscriptRef
}

func (f *fakeRuns) Transcript(_ context.Context, ref activities.TranscriptRef) ([]keel.Message, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refs = append(f.refs, ref)
	return f.msgs[:min(ref.Len, len(f.msgs))], nil
}

func (f *fakeRuns) Events(context.Context, string, string, int64) ([]keel.Envelope, error) {
	return nil, errors.New("fakeRuns: no events")
}

func (f *fakeRuns) reads() []activities.TranscriptRef {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]activities.TranscriptRef(nil), f.refs...)
}

var (
	u1 = keel.UserMessage("first")
	a1 = keel.Message{Role: keel.RoleAssistant, Content: "one"}
	u2 = keel.UserMessage("second")
	a2 = keel.Message{Role: keel.RoleAssistant, Content: "two"}
	u3 = keel.UserMessage("third")
)

// withTail is a turn over a transcript of n messages of which only tail is
// sent.
func withTail(n int, tail ...keel.Message) activities.ModelTurnInput {
	in := turnInput(tail...)
	in.Transcript.Len = n
	return in
}

// Model turns carry a transcript reference and only the new messages; the
// worker rebuilds the rest from its cache, or reads it from the run.
func TestModelTurnTranscriptCache(t *testing.T) {
	t.Run("second turn with only a tail", func(t *testing.T) {
		srv := providertest.NewServer(t, providertest.SSEEvents(textStream...))
		env := newTurnEnv(&activities.Activities{Models: fixedModels{backendFor(t, openai.Name, srv.URL)}})
		_, err := env.ExecuteActivity(activities.ModelTurnName, withTail(1, u1))
		require.NoError(t, err)
		_, err = env.ExecuteActivity(activities.ModelTurnName, withTail(3, a1, u2))
		require.NoError(t, err)
		require.Equal(t, []string{"user: first", "assistant: one", "user: second"}, messagesOf(t, srv, 1))
		// A retry of the same turn sends no tail at all.
		_, err = env.ExecuteActivity(activities.ModelTurnName, withTail(3))
		require.NoError(t, err)
		require.Equal(t, messagesOf(t, srv, 1), messagesOf(t, srv, 2))
	})

	t.Run("cache miss without a run reader fails clearly", func(t *testing.T) {
		srv := providertest.NewServer(t, providertest.SSEEvents(textStream...))
		env := newTurnEnv(&activities.Activities{Models: fixedModels{backendFor(t, openai.Name, srv.URL)}})
		_, err := env.ExecuteActivity(activities.ModelTurnName, withTail(3, a1, u2))
		require.Error(t, err)
		var appErr *temporal.ApplicationError
		require.True(t, errors.As(err, &appErr), "%T: %v", err, err)
		require.Equal(t, string(keel.CodeInternal), appErr.Type())
		require.True(t, appErr.NonRetryable())
		require.Contains(t, appErr.Error(), "s1/run-1")
		require.Contains(t, appErr.Error(), "no run reader")
		require.Zero(t, srv.Count(), "no provider request without the transcript")
	})

	t.Run("cache miss reads the run", func(t *testing.T) {
		srv := providertest.NewServer(t, providertest.SSEEvents(textStream...))
		runs := &fakeRuns{msgs: []keel.Message{u1, a1, u2, a2, u3}}
		env := newTurnEnv(&activities.Activities{Models: fixedModels{backendFor(t, openai.Name, srv.URL)}, Runs: runs})
		_, err := env.ExecuteActivity(activities.ModelTurnName, withTail(3, a1, u2))
		require.NoError(t, err)
		require.Equal(t, []activities.TranscriptRef{{WorkflowID: "s1/run-1", RunID: "exec-1", Len: 3}}, runs.reads())
		require.Equal(t, []string{"user: first", "assistant: one", "user: second"}, messagesOf(t, srv, 0))

		// The fetched prefix is cached: the next turn needs only its tail.
		_, err = env.ExecuteActivity(activities.ModelTurnName, withTail(5, a2, u3))
		require.NoError(t, err)
		require.Len(t, runs.reads(), 1, "no second read")
		require.Equal(t, []string{"user: first", "assistant: one", "user: second", "assistant: two", "user: third"},
			messagesOf(t, srv, 1))
	})

	t.Run("a short transcript from the run is refused", func(t *testing.T) {
		srv := providertest.NewServer(t, providertest.SSEEvents(textStream...))
		runs := &fakeRuns{msgs: []keel.Message{u1}}
		env := newTurnEnv(&activities.Activities{Models: fixedModels{backendFor(t, openai.Name, srv.URL)}, Runs: runs})
		_, err := env.ExecuteActivity(activities.ModelTurnName, withTail(3, a1, u2))
		require.ErrorContains(t, err, "has 1 messages, want 3")
		require.Zero(t, srv.Count())
	})
}
