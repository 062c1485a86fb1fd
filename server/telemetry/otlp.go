package telemetry

import (
	"context"
	"fmt"
	"os"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// otlpFromEnv returns the OTLP exporter the environment asks for, with a
// note for banners, or nil when it asks for none. The exporters read the
// endpoint, headers, certificates, compression and timeout from the
// OTEL_EXPORTER_OTLP_* variables themselves; creating one does not
// connect.
func otlpFromEnv(ctx context.Context) (sdktrace.SpanExporter, string, error) {
	if !otlpEnabled() {
		return nil, "off", nil
	}
	endpoint := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if endpoint == "" {
		endpoint = os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	switch p := otlpProtocol(); p {
	case "grpc":
		exp, err := otlptracegrpc.New(ctx)
		if err != nil {
			return nil, "", fmt.Errorf("telemetry: OTLP gRPC exporter: %w", err)
		}
		return exp, "OTLP grpc to " + endpoint, nil
	case "http/protobuf":
		exp, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, "", fmt.Errorf("telemetry: OTLP HTTP exporter: %w", err)
		}
		return exp, "OTLP http/protobuf to " + endpoint, nil
	default:
		return nil, "", fmt.Errorf("%w %q (OTEL_EXPORTER_OTLP_PROTOCOL): want grpc or http/protobuf", ErrOTLPProtocol, p)
	}
}
