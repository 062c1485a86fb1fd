package activities

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/keelrun/keel/logging"
)

// logger is Activities.Logger, or the library default.
func (a *Activities) logger() *zap.Logger {
	if a.Logger != nil {
		return a.Logger
	}
	return logging.Default()
}

// log is the logger of the activity running under ctx: the run logger
// LogInterceptor derived from its input, else Activities.Logger.
func (a *Activities) log(ctx context.Context) *zap.Logger {
	return logging.FromContext(ctx, a.logger())
}

// LogInterceptor returns a worker interceptor that gives each keel
// activity the logger of what it works for, derived from its input
// (runLogger), in its context, and logs how it ended through it: at debug
// level when it returned or was cancelled, as a warning when it failed. It
// logs neither inputs nor outputs (prompts, tool results), only their
// sizes and outcomes.
func LogInterceptor(l *zap.Logger) interceptor.WorkerInterceptor {
	return &logInterceptor{l: l}
}

type logInterceptor struct {
	interceptor.WorkerInterceptorBase
	l *zap.Logger
}

func (w *logInterceptor) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	i := &logActivity{l: w.l}
	i.Next = next
	return i
}

type logActivity struct {
	interceptor.ActivityInboundInterceptorBase
	l *zap.Logger
}

func (i *logActivity) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	info := activity.GetInfo(ctx)
	var arg any
	if len(in.Args) > 0 {
		arg = in.Args[0]
	}
	log := runLogger(i.l, arg, info).With(zap.String("activity", info.ActivityType.Name))
	start := time.Now()
	res, err := i.Next.ExecuteActivity(logging.NewContext(ctx, log), in)
	fields := append(outcomeFields(arg, res), zap.Duration("duration", time.Since(start)))
	var cancelled *temporal.CanceledError
	switch {
	case err == nil:
		log.Debug("activity finished", fields...)
	case errors.As(err, &cancelled) || ctx.Err() != nil:
		log.Debug("activity cancelled", fields...)
	default:
		log.Warn("activity failed", append(fields, zap.Error(err))...)
	}
	return res, err
}

// runLogger derives an activity's logger from its input: every record
// about a run carries the run's session_id, run_id, step and attempt
// (logging.ForRun). A model turn's attempt is keel's (the run retries a
// turn with a new activity); a tool call's or a compaction's is
// Temporal's (Temporal retries them when a worker dies under them). An
// activity that serves a whole session gets what its workflow ID says.
func runLogger(l *zap.Logger, arg any, info activity.Info) *zap.Logger {
	attempt := int(info.Attempt)
	switch in := arg.(type) {
	case ModelTurnInput:
		return logging.ForRun(l, in.SessionID, in.RunID, in.Step, in.Attempt)
	case ToolInput:
		return logging.ForRun(l, in.SessionID, in.RunID, in.Step, attempt)
	case CompactInput:
		return logging.ForRun(l, in.SessionID, in.RunID, in.Step, attempt)
	}
	return logging.ForWorkflow(l, info.WorkflowExecution.ID)
}

// outcomeFields says what an activity did, without its content.
func outcomeFields(arg, res any) []zap.Field {
	var f []zap.Field
	switch in := arg.(type) {
	case ModelTurnInput:
		f = append(f, zap.String("model", in.Model))
	case ToolInput:
		f = append(f, zap.String("tool", in.Call.Name), zap.String("tool_call_id", in.Call.ID))
	}
	switch r := res.(type) {
	case *ModelTurnResult:
		f = append(f, zap.Int64("input_tokens", r.Metrics.InputTokens), zap.Int64("output_tokens", r.Metrics.OutputTokens),
			zap.String("finish", r.Metrics.FinishReason), zap.Int("tool_calls", len(r.Response.ToolCalls)))
	case *ToolOutput:
		f = append(f, zap.String("status", string(r.Status)), zap.Int("output_bytes", len(r.Output)))
	}
	return f
}
