package workflows_test

import (
	"encoding/json"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"

	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/instrument"
	"github.com/keelrun/keel/server/tool"
)

// capturedMetrics records what a metrics handler was given, by name and
// sorted tags.
type capturedMetrics struct {
	mu      sync.Mutex
	counts  map[string]int64
	timings map[string][]time.Duration
}

type captureHandler struct {
	c    *capturedMetrics
	tags map[string]string
}

func newCapture() (*capturedMetrics, client.MetricsHandler) {
	c := &capturedMetrics{counts: map[string]int64{}, timings: map[string][]time.Duration{}}
	return c, captureHandler{c: c}
}

func (h captureHandler) WithTags(tags map[string]string) client.MetricsHandler {
	merged := map[string]string{}
	for k, v := range h.tags {
		merged[k] = v
	}
	for k, v := range tags {
		merged[k] = v
	}
	return captureHandler{c: h.c, tags: merged}
}

// key is the metric's name and its keel labels (the SDK's left out).
func (h captureHandler) key(name string) string {
	var kv []string
	for k, v := range h.tags {
		switch k {
		case "namespace", "task_queue", "workflow_type", "activity_type":
		default:
			kv = append(kv, k+"="+v)
		}
	}
	sort.Strings(kv)
	return name + "{" + strings.Join(kv, ",") + "}"
}

type counterFunc func(int64)

func (f counterFunc) Inc(d int64) { f(d) }

type timerFunc func(time.Duration)

func (f timerFunc) Record(d time.Duration) { f(d) }

func (h captureHandler) Counter(name string) client.MetricsCounter {
	k := h.key(name)
	return counterFunc(func(d int64) { h.c.mu.Lock(); h.c.counts[k] += d; h.c.mu.Unlock() })
}

func (h captureHandler) Gauge(name string) client.MetricsGauge {
	return client.MetricsNopHandler.Gauge(name)
}

func (h captureHandler) Timer(name string) client.MetricsTimer {
	k := h.key(name)
	return timerFunc(func(d time.Duration) { h.c.mu.Lock(); h.c.timings[k] = append(h.c.timings[k], d); h.c.mu.Unlock() })
}

// A run records its outcome, its retries, its tool calls and
// its questions' waits, in workflow time.
func TestRunRecordsMetrics(t *testing.T) {
	got, h := newCapture()
	var suite testsuite.WorkflowTestSuite
	suite.SetMetricsHandler(h)
	env := newEnvOf(t, &suite, scriptedProvider(t, `{"turns":[
	  {"failures":[{"kind":"rate_limited","status":429,"retry_after":"3s"}],
	   "tool_calls":[{"id":"e","name":"echo","arguments":{"text":"hi"}},
	                 {"id":"f","name":"fail","arguments":{"text":"no"}},
	                 {"id":"q","name":"ask_user","arguments":{"question":"Colour?"}}]},
	  {"text":["done"]}]}`), tool.AskUser())
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(api.UpdateRespond, "answer", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Errorf("answer rejected: %v", err) }, OnAccept: func() {},
			OnComplete: func(any, error) {},
		}, api.RespondRequest{RequestID: "q/ask_user", Answer: json.RawMessage(`"blue"`)})
	}, time.Hour)
	res := env.execSession(t, promptOf("go", "echo", "fail", "ask_user"))
	require.Equal(t, "done", res.Outcome.Text)

	require.Equal(t, int64(1), got.counts[instrument.RunsTotal+"{outcome=completed}"])
	require.Equal(t, int64(1), got.counts[instrument.ModelRetriesTotal+"{kind=rate_limited}"])
	require.Equal(t, int64(1), got.counts[instrument.ToolCallsTotal+"{status=ok,tool=echo}"])
	require.Equal(t, int64(1), got.counts[instrument.ToolCallsTotal+"{status=error,tool=fail}"])
	require.Equal(t, int64(1), got.counts[instrument.ToolCallsTotal+"{status=ok,tool=ask_user}"])
	wait := got.timings[instrument.HostInputWait+"{outcome=answered}"]
	require.Len(t, wait, 1)
	require.InDelta(t, time.Hour.Seconds(), wait[0].Seconds(), 60, "the answer came an hour in, less the retry wait")
	runs := got.timings[instrument.RunDuration+"{outcome=completed}"]
	require.Len(t, runs, 1)
	require.GreaterOrEqual(t, runs[0], time.Hour, "the run waited an hour for its answer")
}

// A cancelled run is counted as such, and its open question as
// interrupted.
func TestCancelledRunRecordsMetrics(t *testing.T) {
	got, h := newCapture()
	var suite testsuite.WorkflowTestSuite
	suite.SetMetricsHandler(h)
	env := newEnvOf(t, &suite, scriptedProvider(t, `{"turns":[
	  {"tool_calls":[{"id":"q","name":"ask_user","arguments":{"question":"Colour?"}}]},
	  {"text":["never"]}]}`), tool.AskUser())
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(api.SignalCancel, nil) }, 10*time.Minute)
	res := env.execSession(t, promptOf("go", "ask_user"))
	require.Equal(t, "cancelled", string(res.Outcome.Status))
	require.Equal(t, int64(1), got.counts[instrument.RunsTotal+"{outcome=cancelled}"])
	require.Len(t, got.timings[instrument.HostInputWait+"{outcome=interrupted}"], 1)
	require.Equal(t, int64(1), got.counts[instrument.ToolCallsTotal+"{status=interrupted,tool=ask_user}"])
}
