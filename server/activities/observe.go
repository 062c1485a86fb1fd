package activities

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/internal/instrument"
)

// This file records what model turns cost, as metrics on the Temporal
// SDK's handler of the activity (the client's, tagged with the activity
// and task queue), and traces model turns and tool calls with spans under
// the SDK interceptor's RunActivity span (docs/observability.md).

func (a *Activities) tracer() trace.Tracer {
	if a.Tracer != nil {
		return a.Tracer
	}
	return instrument.Tracer(nil)
}

// turnObserver measures one ModelTurn activity.
type turnObserver struct {
	span  trace.Span
	start time.Time
	// provider and model are the labels of the turn's metrics.
	provider, model string
}

// modelLabel is the "model" label of a turn of spec whose model is model
// (ModelLabeler).
func (a *Activities) modelLabel(spec, model string) string {
	if l, ok := a.Models.(ModelLabeler); ok {
		return l.ModelLabel(spec, model)
	}
	return model
}

// observeTurn starts measuring a turn: its span names model, its metrics
// carry label.
func (a *Activities) observeTurn(ctx context.Context, in ModelTurnInput, providerName, model, label string) (context.Context, *turnObserver) {
	ctx, span := instrument.StartModelTurn(ctx, a.tracer(), instrument.Turn{
		SessionID: in.SessionID, RunID: in.RunID, Step: in.Step, Attempt: in.Attempt,
		System: providerName, Model: model,
	})
	return ctx, &turnObserver{span: span, start: time.Now(), provider: providerName, model: label}
}

// end records the turn's outcome: res on success, else what err carries.
func (o *turnObserver) end(ctx context.Context, res *ModelTurnResult, err error) {
	t := instrument.ModelTurn{Provider: o.provider, Model: o.model, Took: time.Since(o.start), Outcome: "ok"}
	finish := ""
	if res != nil && res.RateWait != nil {
		// Not sent: the run waits for its rate limit (docs/contract.md §20.5).
		t.Outcome = "rate_wait"
	} else if res != nil && err == nil {
		t.FirstToken = res.Metrics.TimeToFirstToken.Std()
		t.InputTokens, t.OutputTokens = res.Response.Usage.InputTokens, res.Response.Usage.OutputTokens
		t.Cost = res.Response.Usage.Cost
		finish = string(res.Response.Finish)
	} else {
		var f TurnFailure
		var canceled *temporal.CanceledError
		var appErr *temporal.ApplicationError
		switch {
		case errors.As(err, &canceled):
			t.Outcome = "cancelled"
			if canceled.HasDetails() {
				_ = canceled.Details(&f)
			}
		case errors.As(err, &appErr):
			t.Outcome = "error"
			if appErr.HasDetails() {
				_ = appErr.Details(&f)
			}
		default:
			t.Outcome = "error"
		}
		t.InputTokens, t.OutputTokens = f.Usage.InputTokens, f.Usage.OutputTokens
		t.Cost = f.Usage.Cost
		if f.Budget != nil {
			t.Outcome = "budget_exceeded"
		}
	}
	instrument.ModelTurnDone(activity.GetMetricsHandler(ctx), t)
	instrument.EndModelTurn(o.span, t.InputTokens, t.OutputTokens, finish, err)
}

// toolObserver traces one Tool activity.
type toolObserver struct{ span trace.Span }

func (a *Activities) observeTool(ctx context.Context, in ToolInput) (context.Context, *toolObserver) {
	ctx, span := instrument.StartToolCall(ctx, a.tracer(), in.SessionID, in.RunID, in.Call.Name, in.Call.ID,
		int(activity.GetInfo(ctx).Attempt))
	return ctx, &toolObserver{span: span}
}

// end ends the call's span with its status: the output's, needs_input
// for a call that asked the host, interrupted for a cancelled one. The Run
// workflow counts tool calls (keel_tool_calls_total), since some run in
// the workflow itself and only it knows the final status.
func (o *toolObserver) end(out *ToolOutput, err error) {
	status := string(keel.ToolInterrupted)
	switch {
	case err != nil || out == nil:
	case out.NeedInput != nil:
		status = "needs_input"
	default:
		status = string(out.Status)
	}
	instrument.EndToolCall(o.span, status)
}
