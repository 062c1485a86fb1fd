// Package telemetry turns on keel's metrics and traces in a process: a
// Prometheus endpoint with the Temporal SDK's metrics and keel's own
// (docs/observability.md lists them), and OpenTelemetry traces (the
// Temporal SDK's tracing interceptor, and keel's spans of model turns and
// tool calls) exported with OTLP as the standard OTEL_EXPORTER_OTLP_*
// variables say.
//
//	tel, err := telemetry.Start(ctx, telemetry.Options{MetricsAddress: "127.0.0.1:9464"})
//	if err != nil {
//		return err
//	}
//	defer tel.Shutdown(context.Background())
//	c, err := client.Dial(tel.ClientOptions(client.Options{HostPort: "localhost:7233"}))
//	...
//	w, err := worker.New(c, tel.WorkerOptions(worker.Options{}))
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"

	"github.com/keelrun/keel/internal/httpguard"
	"github.com/keelrun/keel/internal/instrument"
	"github.com/keelrun/keel/server/worker"
)

// Options says what to turn on. The zero value turns on nothing unless
// the OTEL_EXPORTER_OTLP_* variables ask for traces.
type Options struct {
	// MetricsAddress is the host:port of the Prometheus endpoint, served
	// at /metrics. Optional: "" serves no metrics (the SDK and keel then
	// record nothing). Port 0 picks a free port (MetricsURL says which).
	MetricsAddress string
	// MetricsAllowedHosts are the host names (or IP addresses, no port)
	// the endpoint answers to besides its own address and, on loopback,
	// localhost: the names a scraper uses (a Prometheus static target
	// "keel-worker-1:9464" sends Host keel-worker-1). A request naming any
	// other host gets 403, so a web page whose name was made to resolve to
	// the endpoint (DNS rebinding) cannot read it. Optional: none.
	MetricsAllowedHosts []string
	// SpanExporter receives the spans. Optional; default: OTLP when
	// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is
	// set (see Start), else no tracing.
	SpanExporter sdktrace.SpanExporter
	// ServiceName is the service.name of the spans and of target_info.
	// Optional; default "keel" (OTEL_SERVICE_NAME and
	// OTEL_RESOURCE_ATTRIBUTES override it).
	ServiceName string
}

// ErrOTLPProtocol is returned by Start for an OTLP protocol it does not
// speak.
var ErrOTLPProtocol = errors.New("telemetry: unsupported OTLP protocol")

// Telemetry is a process's metrics and traces. Its methods are safe on a
// nil *Telemetry, which turns nothing on.
type Telemetry struct {
	metrics    client.MetricsHandler
	meters     *sdkmetric.MeterProvider
	tracers    *sdktrace.TracerProvider
	tracing    interceptor.Interceptor
	exportNote string
	server     *http.Server
	serverDone chan struct{}
	metricsURL string
}

// Start turns on what opts asks for: with MetricsAddress it listens there
// and serves /metrics; with a SpanExporter, or when the OTLP variables
// name an endpoint, it traces. OTEL_EXPORTER_OTLP_TRACES_PROTOCOL (else
// OTEL_EXPORTER_OTLP_PROTOCOL) picks the exporter: "grpc", or
// "http/protobuf" (the default, as the OpenTelemetry specification
// says); the exporter reads the endpoint, headers, TLS and timeout from
// the same variables. OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none
// turn OTLP off. Shut it down with Shutdown.
func Start(ctx context.Context, opts Options) (t *Telemetry, err error) {
	t = &Telemetry{metrics: client.MetricsNopHandler}
	defer func() {
		if err != nil {
			_ = t.Shutdown(context.Background())
			t = nil
		}
	}()
	res, err := newResource(ctx, opts.ServiceName)
	if err != nil {
		return t, err
	}
	if opts.MetricsAddress != "" {
		if err := t.startMetrics(opts.MetricsAddress, opts.MetricsAllowedHosts, res); err != nil {
			return t, err
		}
	}
	exp := opts.SpanExporter
	if exp == nil {
		if exp, t.exportNote, err = otlpFromEnv(ctx); err != nil {
			return t, err
		}
	} else {
		t.exportNote = "on"
	}
	if exp != nil {
		t.tracers = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		if t.tracing, err = instrument.TracingInterceptor(t.tracers); err != nil {
			return t, fmt.Errorf("telemetry: %w", err)
		}
	}
	return t, nil
}

func newResource(ctx context.Context, service string) (*resource.Resource, error) {
	if service == "" {
		service = "keel"
	}
	// Later options win: the environment overrides the default name.
	res, err := resource.New(ctx, resource.WithTelemetrySDK(),
		resource.WithAttributes(attribute.String("service.name", service)), resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	return res, nil
}

// durationBuckets serve every keel and SDK histogram, all in seconds:
// from a millisecond (a workflow task) to hours (a question to a human).
var durationBuckets = []float64{
	0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
	1, 2.5, 5, 10, 30, 60, 120, 300, 900, 3600, 14400,
}

func (t *Telemetry) startMetrics(addr string, hosts []string, res *resource.Resource) error {
	guard, err := httpguard.New(httpguard.Options{AllowedHosts: hosts})
	if err != nil {
		return fmt.Errorf("telemetry: metrics endpoint: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		return fmt.Errorf("telemetry: prometheus exporter: %w", err)
	}
	seconds := sdkmetric.NewView(sdkmetric.Instrument{Kind: sdkmetric.InstrumentKindHistogram, Unit: "s"},
		sdkmetric.Stream{Aggregation: sdkmetric.AggregationExplicitBucketHistogram{Boundaries: durationBuckets}})
	t.meters = sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithResource(res), sdkmetric.WithView(seconds))
	t.metrics = temporalotel.NewMetricsHandler(temporalotel.MetricsHandlerOptions{
		Meter:                t.meters.Meter("github.com/keelrun/keel"),
		UseMonotonicCounters: true,
		// The default panics; a metric that cannot be recorded must not
		// take a worker down.
		OnError: otel.Handle,
	})
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("telemetry: metrics address %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.server = httpguard.NewServer(guard.Handler(mux))
	t.serverDone = make(chan struct{})
	t.metricsURL = "http://" + l.Addr().String() + "/metrics"
	go func() {
		defer close(t.serverDone)
		_ = t.server.Serve(l)
	}()
	return nil
}

// MetricsHandler is the Temporal SDK's metrics handler that records into
// the Prometheus endpoint: client.MetricsNopHandler without one.
func (t *Telemetry) MetricsHandler() client.MetricsHandler {
	if t == nil {
		return client.MetricsNopHandler
	}
	return t.metrics
}

// TracerProvider is where spans go; nil when tracing is off.
func (t *Telemetry) TracerProvider() trace.TracerProvider {
	if t == nil || t.tracers == nil {
		return nil
	}
	return t.tracers
}

// MetricsURL is the Prometheus endpoint's URL, "" when none is served.
func (t *Telemetry) MetricsURL() string {
	if t == nil {
		return ""
	}
	return t.metricsURL
}

// Tracing says where spans go, for a banner: "off", "on", or the OTLP
// protocol and endpoint.
func (t *Telemetry) Tracing() string {
	if t == nil || t.tracers == nil {
		return "off"
	}
	return t.exportNote
}

// ClientOptions returns o with the metrics handler and the tracing
// interceptor set (appended to o's interceptors). Workers created from
// the client inherit both: give a worker's client these options, never
// the worker a second tracing interceptor.
func (t *Telemetry) ClientOptions(o client.Options) client.Options {
	if t == nil {
		return o
	}
	if t.server != nil {
		o.MetricsHandler = t.metrics
	}
	if t.tracing != nil {
		o.Interceptors = append(append([]interceptor.ClientInterceptor(nil), o.Interceptors...), t.tracing)
	}
	return o
}

// WorkerOptions returns o with the fields that carry keel's own spans set.
func (t *Telemetry) WorkerOptions(o worker.Options) worker.Options {
	if tp := t.TracerProvider(); tp != nil {
		o.TracerProvider = tp
	}
	return o
}

// ForceFlush exports the spans ended so far.
func (t *Telemetry) ForceFlush(ctx context.Context) error {
	if t == nil || t.tracers == nil {
		return nil
	}
	return t.tracers.ForceFlush(ctx)
}

// Shutdown stops serving metrics and exports the spans still buffered.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	var errs []error
	if t.server != nil {
		errs = append(errs, t.server.Shutdown(ctx))
		<-t.serverDone
	}
	if t.meters != nil {
		errs = append(errs, t.meters.Shutdown(ctx))
	}
	if t.tracers != nil {
		errs = append(errs, t.tracers.Shutdown(ctx))
	}
	return errors.Join(errs...)
}

// OTLPRequested reports whether the OTEL_EXPORTER_OTLP_* variables ask
// for traces, that is whether Start without a SpanExporter traces. A
// process that would start telemetry only to trace (a command-line
// client, say) checks it first, so that without the variables it pays
// nothing.
func OTLPRequested() bool { return otlpEnabled() }

// otlpEnabled reports whether the environment asks for OTLP traces.
func otlpEnabled() bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") || os.Getenv("OTEL_TRACES_EXPORTER") == "none" {
		return false
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// otlpProtocol is the OTLP protocol the environment asks for.
func otlpProtocol() string {
	if p := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"); p != "" {
		return p
	}
	if p := os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL"); p != "" {
		return p
	}
	return "http/protobuf"
}
