package instrument

import (
	"fmt"

	"go.opentelemetry.io/otel/trace"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
)

// SpanContextKey is the workflow.Context key under which the tracing
// interceptor keeps the current span. keel's own key, so that the Session
// workflow can start a run under the span of the send that asked for it
// (a run starts from the session's main loop, not from the update
// handler). Reading and setting it changes nothing in history.
var SpanContextKey any = spanContextKey{}

type spanContextKey struct{}

// TracingInterceptor returns the Temporal SDK's OpenTelemetry tracing
// interceptor on tp, for a client's options: its workers inherit it.
// Query spans are off: clients poll the state and events queries, and
// those spans would bury the runs'.
func TracingInterceptor(tp trace.TracerProvider) (interceptor.Interceptor, error) {
	i, err := temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{
		Tracer:              tp.Tracer("temporal-sdk-go"),
		DisableQueryTracing: true,
		SpanContextKey:      SpanContextKey,
	})
	if err != nil {
		return nil, fmt.Errorf("tracing interceptor: %w", err)
	}
	return i, nil
}
