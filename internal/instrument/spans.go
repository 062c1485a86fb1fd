package instrument

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// TracerName is the instrumentation scope of keel's own spans.
const TracerName = "github.com/keelrun/keel"

// Attribute keys of keel's spans: OpenTelemetry's GenAI semantic
// conventions where they name the thing, keel.* for the rest.
const (
	AttrGenAIOperation     = "gen_ai.operation.name"
	AttrGenAISystem        = "gen_ai.system"
	AttrGenAIRequestModel  = "gen_ai.request.model"
	AttrGenAIInputTokens   = "gen_ai.usage.input_tokens"
	AttrGenAIOutputTokens  = "gen_ai.usage.output_tokens"
	AttrGenAIFinishReasons = "gen_ai.response.finish_reasons"
	AttrGenAIToolName      = "gen_ai.tool.name"
	AttrGenAIToolCallID    = "gen_ai.tool.call.id"
	AttrSessionID          = "keel.session_id"
	AttrRunID              = "keel.run_id"
	AttrStep               = "keel.step"
	AttrAttempt            = "keel.attempt"
	AttrToolStatus         = "keel.tool.status"
)

// Tracer returns keel's tracer of tp, or one that records nothing when tp
// is nil.
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return tp.Tracer(TracerName)
}

// Turn identifies a model turn's span.
type Turn struct {
	SessionID, RunID string
	Step, Attempt    int
	// System is the provider's name (openai, anthropic, scripted); Model
	// the model asked for.
	System, Model string
}

// StartModelTurn starts the span of one provider request, named as the
// GenAI conventions name a chat call: "chat MODEL".
func StartModelTurn(ctx context.Context, t trace.Tracer, turn Turn) (context.Context, trace.Span) {
	return t.Start(ctx, "chat "+turn.Model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String(AttrGenAIOperation, "chat"),
		attribute.String(AttrGenAISystem, turn.System),
		attribute.String(AttrGenAIRequestModel, turn.Model),
		attribute.String(AttrSessionID, turn.SessionID),
		attribute.String(AttrRunID, turn.RunID),
		attribute.Int(AttrStep, turn.Step),
		attribute.Int(AttrAttempt, turn.Attempt),
	))
}

// EndModelTurn ends a model turn's span with its usage and finish reason;
// err, when set, marks it failed (its message must hold no secret).
func EndModelTurn(span trace.Span, inputTokens, outputTokens int64, finish string, err error) {
	span.SetAttributes(
		attribute.Int64(AttrGenAIInputTokens, inputTokens),
		attribute.Int64(AttrGenAIOutputTokens, outputTokens),
	)
	if finish != "" {
		span.SetAttributes(attribute.StringSlice(AttrGenAIFinishReasons, []string{finish}))
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// StartToolCall starts the span of one tool call: "execute_tool NAME".
func StartToolCall(ctx context.Context, t trace.Tracer, sessionID, runID, name, callID string, attempt int) (context.Context, trace.Span) {
	return t.Start(ctx, "execute_tool "+name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		attribute.String(AttrGenAIOperation, "execute_tool"),
		attribute.String(AttrGenAIToolName, name),
		attribute.String(AttrGenAIToolCallID, callID),
		attribute.String(AttrSessionID, sessionID),
		attribute.String(AttrRunID, runID),
		attribute.Int(AttrAttempt, attempt),
	))
}

// EndToolCall ends a tool call's span with its status; a status other
// than ok or needs_input marks the span failed.
func EndToolCall(span trace.Span, status string) {
	span.SetAttributes(attribute.String(AttrToolStatus, status))
	if status != "ok" && status != "needs_input" {
		span.SetStatus(codes.Error, "tool call "+status)
	}
	span.End()
}
