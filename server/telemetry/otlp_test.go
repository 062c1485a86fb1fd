package telemetry_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	sdkclient "go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"

	"github.com/keelrun/keel/server/telemetry"
)

// clearOTEL unsets the variables Start reads, for the test.
func clearOTEL(t *testing.T) {
	for _, v := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
		"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_SDK_DISABLED",
		"OTEL_TRACES_EXPORTER", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"} {
		t.Setenv(v, "")
	}
}

func TestNothingOnByDefault(t *testing.T) {
	clearOTEL(t)
	require.False(t, telemetry.OTLPRequested())
	tel, err := telemetry.Start(context.Background(), telemetry.Options{})
	require.NoError(t, err)
	defer tel.Shutdown(context.Background())
	require.Empty(t, tel.MetricsURL())
	require.Nil(t, tel.TracerProvider())
	require.Equal(t, "off", tel.Tracing())
	require.Equal(t, sdkclient.MetricsNopHandler, tel.MetricsHandler())
	opts := tel.ClientOptions(sdkclient.Options{HostPort: "x:1"})
	require.Nil(t, opts.MetricsHandler)
	require.Empty(t, opts.Interceptors)
}

func TestOTLPProtocolRefused(t *testing.T) {
	clearOTEL(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
	_, err := telemetry.Start(context.Background(), telemetry.Options{})
	require.True(t, errors.Is(err, telemetry.ErrOTLPProtocol), "%v", err)
	require.Contains(t, err.Error(), "grpc or http/protobuf")
}

func TestOTLPDisabled(t *testing.T) {
	clearOTEL(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
	t.Setenv("OTEL_SDK_DISABLED", "true")
	require.False(t, telemetry.OTLPRequested())
	tel, err := telemetry.Start(context.Background(), telemetry.Options{})
	require.NoError(t, err)
	defer tel.Shutdown(context.Background())
	require.Nil(t, tel.TracerProvider())
}

// The OTLP variables alone send spans to a collector: here an HTTP one
// that decodes what it receives.
func TestOTLPHTTPFromEnvironment(t *testing.T) {
	clearOTEL(t)
	got := make(chan *coltracepb.ExportTraceServiceRequest, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/traces" {
			http.NotFound(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		got <- &req
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	}))
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_SERVICE_NAME", "keel-test")
	require.True(t, telemetry.OTLPRequested())

	ctx := context.Background()
	tel, err := telemetry.Start(ctx, telemetry.Options{})
	require.NoError(t, err)
	defer tel.Shutdown(ctx)
	require.True(t, strings.HasPrefix(tel.Tracing(), "OTLP http/protobuf to "), tel.Tracing())
	require.NotEmpty(t, tel.ClientOptions(sdkclient.Options{}).Interceptors)

	_, span := tel.TracerProvider().Tracer("test").Start(ctx, "probe")
	span.End()
	require.NoError(t, tel.ForceFlush(ctx))
	req := <-got
	rs := req.GetResourceSpans()
	require.Len(t, rs, 1)
	service := ""
	for _, a := range rs[0].GetResource().GetAttributes() {
		if a.GetKey() == "service.name" {
			service = a.GetValue().GetStringValue()
		}
	}
	require.Equal(t, "keel-test", service)
	require.Equal(t, "probe", rs[0].GetScopeSpans()[0].GetSpans()[0].GetName())
}

func TestOTLPGRPCChosen(t *testing.T) {
	clearOTEL(t)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:4317")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	tel, err := telemetry.Start(context.Background(), telemetry.Options{})
	require.NoError(t, err)
	require.Equal(t, "OTLP grpc to http://127.0.0.1:4317", tel.Tracing())
	// Nothing was exported, so nothing waits for the absent collector.
	require.NoError(t, tel.Shutdown(context.Background()))
}
