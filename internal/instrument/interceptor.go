package instrument

import (
	"fmt"

	"go.opentelemetry.io/otel/trace"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
)

// TracingInterceptor returns the Temporal SDK's OpenTelemetry tracing
// interceptor on tp, for a client's options: its workers inherit it.
// Query spans are off: clients poll the state and events queries, and
// those spans would bury the runs'.
func TracingInterceptor(tp trace.TracerProvider) (interceptor.Interceptor, error) {
	i, err := temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{
		Tracer:              tp.Tracer("temporal-sdk-go"),
		DisableQueryTracing: true,
	})
	if err != nil {
		return nil, fmt.Errorf("tracing interceptor: %w", err)
	}
	return i, nil
}
