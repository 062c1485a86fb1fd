package worker_test

import (
	"context"
	enumspb "go.temporal.io/api/enums/v1"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"

	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/connect"
	"github.com/keelrun/keel/internal/testpki"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
	"github.com/keelrun/keel/server/worker"
)

// TestDialMutualTLS runs a worker dialed with a client certificate on a
// server that requires one, and a session on it. The worker's metrics and
// spans reach the handler and tracer provider its Options name.
func TestDialMutualTLS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	pki := testpki.New(t)
	srv := keeltest.StartServer(t, devserver.Config{TLS: pki.ServerTLS(true)})
	codec := keeltest.Codec(t, srv)
	metrics := sdkmetric.NewManualReader()
	spans := tracetest.NewInMemoryExporter()

	c, opts, err := worker.Dial(ctx, connect.Options{HostPort: srv.Address(), IgnoreEnvironment: true,
		TLS: &connect.TLS{ServerCAFile: pki.CAFile, ClientCertFile: pki.ClientCertFile, ClientKeyFile: pki.ClientKeyFile}},
		worker.Options{Models: keeltest.ScriptModels(t, `{"turns":[{"text":["dialed"]}]}`), Workspace: t.TempDir(),
			Codec: codec, StopTimeout: time.Second,
			MetricsHandler: temporalotel.NewMetricsHandler(temporalotel.MetricsHandlerOptions{
				Meter: sdkmetric.NewMeterProvider(sdkmetric.WithReader(metrics)).Meter("test"), UseMonotonicCounters: true}),
			TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))})
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	defer c.Close()
	if opts.Namespace != "default" {
		t.Errorf("Namespace = %q, want default", opts.Namespace)
	}
	w, err := worker.New(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	kc := keeltest.Client(t, srv, nil)
	run, err := kc.Session("worker-tls").Send(ctx, "hi", client.WithConfig(api.RunConfig{Model: api.DefaultModel}))
	if err != nil {
		t.Fatal(err)
	}
	out, err := run.Outcome(ctx)
	if err != nil || out.Text != "dialed" {
		t.Fatalf("outcome %+v, %v; want the script's text", out, err)
	}
	// The session's execution span ends when the execution does, which
	// the outcome may beat.
	desc, err := c.DescribeWorkflowExecution(ctx, "worker-tls", "")
	if err != nil {
		t.Fatal(err)
	}
	closed := c.GetWorkflowHistory(ctx, "worker-tls", desc.GetWorkflowExecutionInfo().GetFirstRunId(), true,
		enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
	if _, err := closed.Next(); err != nil {
		t.Fatal(err)
	}

	var rm metricdata.ResourceMetrics
	if err := metrics.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	recorded := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			recorded[m.Name] = true
		}
	}
	for _, name := range []string{"keel_runs_total", "keel_model_turn_duration_seconds", "temporal_request"} {
		if !recorded[name] {
			t.Errorf("metric %s not recorded; got %v", name, recorded)
		}
	}
	names := map[string]bool{}
	for _, s := range spans.GetSpans() {
		names[s.Name] = true
	}
	for _, name := range []string{"RunWorkflow:Session", "RunActivity:ModelTurn", "chat scripted"} {
		if !names[name] {
			t.Errorf("span %s not recorded; got %v", name, names)
		}
	}
}
