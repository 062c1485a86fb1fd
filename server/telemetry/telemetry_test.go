package telemetry_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/internal/instrument"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
	"github.com/keelrun/keel/server/store"
	"github.com/keelrun/keel/server/telemetry"
	"github.com/keelrun/keel/server/tool"
	"github.com/keelrun/keel/server/worker"
)

// The first attempt of turn 1 is malformed (retried at once), then the
// model reads a file and asks the user; turn 2 answers.
const observedScript = `{"turns":[
  {"failures":[{"kind":"malformed"}],
   "text":["Let me look."],
   "tool_calls":[{"id":"r","name":"read_file","arguments":{"path":"notes.txt"}},
                 {"id":"q","name":"ask_user","arguments":{"question":"Colour?"}}],
   "usage":{"input_tokens":100,"output_tokens":20}},
  {"text":["All ","done."],"usage":{"input_tokens":150,"output_tokens":5}}]}`

// TestRunMetricsAndTraces runs one run on the embedded server with metrics
// and traces on, then scrapes /metrics and reads the spans.
func TestRunMetricsAndTraces(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	spans := tracetest.NewInMemoryExporter()
	tel, err := telemetry.Start(ctx, telemetry.Options{MetricsAddress: "127.0.0.1:0", SpanExporter: spans})
	require.NoError(t, err)
	defer func() { require.NoError(t, tel.Shutdown(context.Background())) }()

	srv := keeltest.StartServer(t, devserver.Config{})
	dc := store.NewDataConverter(keeltest.Codec(t, srv))
	tc, err := srv.Dial(ctx, tel.ClientOptions(sdkclient.Options{DataConverter: dc}))
	require.NoError(t, err)
	defer tc.Close()

	ws := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("blue is nice"), 0o600))
	tools, err := tool.Builtins(ws)
	require.NoError(t, err)
	ch := live.NewMemory()
	defer ch.Close()
	var book keeltest.ScriptBook
	observed := book.Add(t, "observed", observedScript)
	stuck := book.Add(t, "stuck", `{"turns":[{"tool_calls":[{"id":"z","name":"sleep","arguments":{"seconds":3600}}],"usage":{"input_tokens":10}}]}`)
	// Two models priced in two currencies (docs/contract.md §20.4).
	prices := map[string]keel.Price{observed: {Currency: "USD", Input: 2, Output: 10}, stuck: {Currency: "EUR", Input: 3, Output: 3}}
	w, err := worker.New(tc, tel.WorkerOptions(worker.Options{Models: &book,
		Tools: tools, Live: ch, StopTimeout: time.Second, Policy: activities.Policy{Prices: prices}}))
	require.NoError(t, err)
	require.NoError(t, w.Start())
	defer w.Stop()

	kc, err := client.Dial(ctx, client.Options{Temporal: tc, DataConverter: dc,
		Live: telemetry.MeterLive(ch, tel.MetricsHandler())})
	require.NoError(t, err)
	run, err := kc.Session("observed").Send(ctx, "which colour?",
		client.WithConfig(api.RunConfig{Model: observed, Tools: []string{"read_file", "ask_user"}}))
	require.NoError(t, err)
	deltas := 0
	for ev, err := range run.Events(ctx) {
		require.NoError(t, err)
		if ev.Type == keel.TypeTextDelta {
			deltas++
		}
		if ev.Type == keel.TypeHostInputRequested {
			break
		}
	}
	require.NoError(t, run.Respond(ctx, "q/ask_user", "blue"))
	out, err := run.Outcome(ctx)
	require.NoError(t, err)
	require.Equal(t, "All done.", out.Text)

	// A run whose session's execution an operator terminates never
	// commits its end (docs/contract.md §3.1).
	lost, err := kc.Session("terminated").Send(ctx, "sleep", client.WithConfig(api.RunConfig{Model: stuck, Tools: []string{"sleep"}}))
	require.NoError(t, err)
	for ev, err := range lost.Events(ctx) {
		require.NoError(t, err)
		if ev.Type == keel.TypeToolStarted {
			break
		}
	}
	require.NoError(t, tc.TerminateWorkflow(ctx, lost.Session().ID(), "", "operator"))
	lostOut, err := lost.Outcome(ctx)
	require.Error(t, err)
	require.Equal(t, keel.StatusFailed, lostOut.Status)

	t.Run("metrics", func(t *testing.T) {
		m := scrape(t, tel.MetricsURL())
		var names []string
		for name := range m {
			if strings.HasPrefix(name, "keel_") || strings.HasPrefix(name, "temporal_") {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		t.Logf("keel and SDK series after the run: %s", strings.Join(names, " "))
		require.Equal(t, 1.0, m.sum("keel_runs_total", "outcome", "completed"))
		// The terminated run never reached its terminal commit, and no
		// code of its session ran after it: no one counts it.
		require.Zero(t, m.sum("keel_runs_total", "outcome", "failed"))
		require.Equal(t, 1.0, m.count("keel_run_duration_seconds", "outcome", "completed"))
		require.Equal(t, 1.0, m.sum("keel_model_retries_total", "kind", "malformed"))
		require.Equal(t, 1.0, m.count("keel_host_input_wait_seconds", "outcome", "answered"))
		require.Positive(t, m.histSum("keel_host_input_wait_seconds", "outcome", "answered"))
		require.Equal(t, 2.0, m.count("keel_model_turn_duration_seconds", "outcome", "ok", "provider", "scripted", "model", "observed"))
		require.Equal(t, 1.0, m.count("keel_model_turn_duration_seconds", "outcome", "error", "model", "observed"))
		require.Equal(t, 2.0, m.count("keel_model_time_to_first_token_seconds", "model", "observed"))
		// The malformed attempt's usage counts too: it was billed.
		require.Equal(t, 350.0, m.sum("keel_model_input_tokens_total", "provider", "scripted", "model", "observed"))
		require.Equal(t, 45.0, m.sum("keel_model_output_tokens_total", "provider", "scripted", "model", "observed"))
		// What they cost by the worker's table, in nanos, per model and
		// currency, the malformed attempt included: 350 prompt tokens at
		// 2 and 45 answer tokens at 10 USD per million; 10 prompt tokens
		// at 3 EUR per million.
		require.Equal(t, 350*2000.0+45*10000.0, m.sum("keel_cost_total", "provider", "scripted", "model", "observed", "currency", "USD"))
		require.Zero(t, m.sum("keel_cost_total", "model", "observed", "currency", "EUR"))
		require.Equal(t, 10*3000.0, m.sum("keel_cost_total", "provider", "scripted", "model", "stuck", "currency", "EUR"))
		require.Equal(t, 1.0, m.sum("keel_tool_calls_total", "tool", "read_file", "status", "ok"))
		require.Equal(t, 1.0, m.sum("keel_tool_calls_total", "tool", "ask_user", "status", "ok"))
		require.Equal(t, 1.0, m.count("keel_tool_call_duration_seconds", "tool", "read_file"))
		require.Equal(t, 1.0, m.count("keel_tool_call_duration_seconds", "tool", "ask_user"))
		if deltas > 0 {
			require.GreaterOrEqual(t, m.count("keel_live_delivery_lag_seconds"), float64(deltas))
		}
		// Workflow metrics carry the SDK's tags.
		require.Equal(t, 1.0, m.sum("keel_runs_total", "workflow_type", api.SessionWorkflowName, "task_queue", api.TaskQueue))
		// The SDK's own: workers, polls, workflow and activity tasks.
		require.Positive(t, m.sum("temporal_worker_start_total"))
		require.Positive(t, m.sum("temporal_request_total"))
		require.GreaterOrEqual(t, m.count("temporal_activity_execution_latency_seconds", "activity_type", "ModelTurn"), 3.0)
		require.Positive(t, m.count("temporal_workflow_task_execution_latency_seconds", "workflow_type", api.SessionWorkflowName))
	})

	t.Run("traces", func(t *testing.T) {
		require.NoError(t, tel.ForceFlush(ctx))
		tr := newTree(spans.GetSpans())
		// send → the session's handling of it → the run's activities: the
		// run executes in the session's workflow, under the send that
		// asked for it.
		turns := tr.named("chat observed")
		require.Len(t, turns, 3) // the malformed attempt and two turns
		trace := turns[0].SpanContext.TraceID()
		for _, s := range turns {
			require.Equal(t, []string{"RunActivity:ModelTurn", "StartActivity:ModelTurn", "HandleUpdate:" + api.UpdateSend,
				"UpdateWithStartWorkflow:" + api.UpdateSend}, tr.ancestors(s))
			require.Equal(t, trace, s.SpanContext.TraceID(), "one trace per run")
			a := attrs(s)
			require.Equal(t, "scripted", a[attribute.Key(instrument.AttrGenAISystem)].AsString())
			require.Equal(t, "observed", a[attribute.Key(instrument.AttrGenAIRequestModel)].AsString())
			require.Equal(t, "observed/run-1", a[attribute.Key(instrument.AttrRunID)].AsString())
		}
		t.Logf("trace of the run:\n%s", tr.render(tr.sendOf(t, turns[0])))
		ok := slices.DeleteFunc(slices.Clone(turns), func(s tracetest.SpanStub) bool { return s.Status.Code != 0 })
		require.Len(t, ok, 2)
		slices.SortFunc(ok, func(a, b tracetest.SpanStub) int { return a.StartTime.Compare(b.StartTime) })
		first, second := attrs(ok[0]), attrs(ok[1])
		require.Equal(t, int64(100), first[attribute.Key(instrument.AttrGenAIInputTokens)].AsInt64())
		require.Equal(t, int64(20), first[attribute.Key(instrument.AttrGenAIOutputTokens)].AsInt64())
		require.Equal(t, []string{"tool_calls"}, first[attribute.Key(instrument.AttrGenAIFinishReasons)].AsStringSlice())
		require.Equal(t, int64(150), second[attribute.Key(instrument.AttrGenAIInputTokens)].AsInt64())
		require.Equal(t, []string{"stop"}, second[attribute.Key(instrument.AttrGenAIFinishReasons)].AsStringSlice())

		read := tr.one(t, "execute_tool read_file")
		require.Equal(t, []string{"RunActivity:Tool", "StartActivity:Tool", "HandleUpdate:" + api.UpdateSend},
			tr.ancestors(read)[:3])
		require.Equal(t, "ok", attrs(read)[attribute.Key(instrument.AttrToolStatus)].AsString())
		require.Equal(t, trace, read.SpanContext.TraceID())
		// The tool ran after the turn that asked for it.
		require.False(t, read.StartTime.Before(ok[0].EndTime))
		// ask_user runs in the workflow: no activity, no span.
		require.Empty(t, tr.named("execute_tool ask_user"))
	})
}

// metrics is a scrape of /metrics.
type metrics map[string]*dto.MetricFamily

func scrape(t *testing.T, url string) metrics {
	t.Helper()
	require.NotEmpty(t, url)
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return fams
}

// matching returns the series of name whose labels include every
// label/value pair of kv.
func (m metrics) matching(name string, kv ...string) []*dto.Metric {
	fam := m[name]
	if fam == nil {
		return nil
	}
	var out []*dto.Metric
	for _, s := range fam.GetMetric() {
		labels := map[string]string{}
		for _, l := range s.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		match := true
		for i := 0; i+1 < len(kv); i += 2 {
			match = match && labels[kv[i]] == kv[i+1]
		}
		if match {
			out = append(out, s)
		}
	}
	return out
}

// sum adds the matching counters' values.
func (m metrics) sum(name string, kv ...string) float64 {
	total := 0.0
	for _, s := range m.matching(name, kv...) {
		total += s.GetCounter().GetValue()
	}
	return total
}

// count adds the matching histograms' observation counts.
func (m metrics) count(name string, kv ...string) float64 {
	total := 0.0
	for _, s := range m.matching(name, kv...) {
		total += float64(s.GetHistogram().GetSampleCount())
	}
	return total
}

// histSum adds the matching histograms' sums.
func (m metrics) histSum(name string, kv ...string) float64 {
	total := 0.0
	for _, s := range m.matching(name, kv...) {
		total += s.GetHistogram().GetSampleSum()
	}
	return total
}

// tree indexes spans by ID.
type tree struct {
	spans []tracetest.SpanStub
	byID  map[string]tracetest.SpanStub
}

func newTree(spans []tracetest.SpanStub) *tree {
	t := &tree{spans: spans, byID: map[string]tracetest.SpanStub{}}
	for _, s := range spans {
		t.byID[s.SpanContext.SpanID().String()] = s
	}
	return t
}

func (tr *tree) named(name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range tr.spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func (tr *tree) one(t *testing.T, name string) tracetest.SpanStub {
	t.Helper()
	got := tr.named(name)
	require.Len(t, got, 1, "spans named %q", name)
	return got[0]
}

// sendOf returns the span of the client's send in the trace of run.
func (tr *tree) sendOf(t *testing.T, run tracetest.SpanStub) tracetest.SpanStub {
	t.Helper()
	var got []tracetest.SpanStub
	for _, s := range tr.named("UpdateWithStartWorkflow:" + api.UpdateSend) {
		if s.SpanContext.TraceID() == run.SpanContext.TraceID() {
			got = append(got, s)
		}
	}
	require.Len(t, got, 1, "sends in the run's trace")
	return got[0]
}

// ancestors returns the names of s's exported ancestors, nearest first.
func (tr *tree) ancestors(s tracetest.SpanStub) []string {
	var out []string
	for {
		p, ok := tr.byID[s.Parent.SpanID().String()]
		if !s.Parent.IsValid() || !ok {
			return out
		}
		out = append(out, p.Name)
		s = p
	}
}

// render draws root's subtree, children in start order.
func (tr *tree) render(root tracetest.SpanStub) string {
	var b strings.Builder
	var walk func(s tracetest.SpanStub, depth int)
	walk = func(s tracetest.SpanStub, depth int) {
		b.WriteString(strings.Repeat("  ", depth) + s.Name)
		a := attrs(s)
		for _, k := range []string{instrument.AttrGenAISystem, instrument.AttrGenAIRequestModel,
			instrument.AttrGenAIInputTokens, instrument.AttrGenAIOutputTokens, instrument.AttrGenAIFinishReasons,
			instrument.AttrToolStatus} {
			if v, ok := a[attribute.Key(k)]; ok {
				b.WriteString(" " + k + "=" + v.Emit())
			}
		}
		if s.Status.Code != 0 {
			b.WriteString(" status=" + s.Status.Code.String())
		}
		b.WriteString("\n")
		var kids []tracetest.SpanStub
		for _, c := range tr.spans {
			if c.Parent.SpanID() == s.SpanContext.SpanID() {
				kids = append(kids, c)
			}
		}
		slices.SortFunc(kids, func(a, b tracetest.SpanStub) int { return a.StartTime.Compare(b.StartTime) })
		for _, c := range kids {
			walk(c, depth+1)
		}
	}
	walk(root, 0)
	return b.String()
}

func attrs(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	out := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		out[kv.Key] = kv.Value
	}
	return out
}
