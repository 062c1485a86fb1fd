package workflows

import (
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/activities"
)

// run is the state of one Run workflow execution.
type run struct {
	in  RunInput
	cfg RunConfig
	// root is the workflow's context; work is cancelled when the run is.
	root, work workflow.Context
	cancelWork workflow.CancelFunc

	seq    int64
	events []keel.Envelope
	// messages is the whole transcript: the session's (in.Transcript) then
	// this run's. shipped counts those already sent to a model turn.
	messages []keel.Message
	shipped  int
	// toolTokens is the last known estimate of the tool schemas' size.
	toolTokens int

	step       int
	state      keel.SessionState
	usage      keel.Usage // successful responses
	usageTotal keel.Usage // every physical request
	outcome    *keel.Outcome
	exec       workflow.Execution
}

// RunWorkflow runs one prompt to its end: model turn, tool calls, model
// turn, ... until the model ends its turn, the step limit is reached, a
// failure exhausts its retries, or the run is cancelled. Every path ends
// with exactly one terminal event and returns a RunResult (cancellation and
// failure are outcomes, not workflow errors).
func RunWorkflow(ctx workflow.Context, in RunInput) (*RunResult, error) {
	r := &run{
		in:       in,
		cfg:      in.Config.withDefaults(),
		root:     ctx,
		seq:      in.BaseSeq,
		messages: append([]keel.Message(nil), in.Transcript...),
		state:    keel.StateRunning,
		exec:     workflow.GetInfo(ctx).WorkflowExecution,
	}
	r.work, r.cancelWork = workflow.WithCancel(ctx)
	if err := r.registerHandlers(ctx); err != nil {
		return nil, err
	}
	r.loop()
	return &RunResult{Outcome: *r.outcome, Messages: r.messages[len(in.Transcript):], Events: r.events}, nil
}

func (r *run) registerHandlers(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, QueryState, func() (RunStatus, error) {
		return RunStatus{RunID: r.in.RunID, State: r.state, Step: r.step, LastSeq: r.seq,
			Outcome: r.outcome, Usage: r.usageTotal, Revision: r.revision()}, nil
	}); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, QueryEvents, func(q EventsQuery) (EventsPage, error) {
		page, err := pageEvents(r.events, r.in.BaseSeq, r.seq, q)
		page.Done = r.outcome != nil
		return page, err
	}); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, activities.QueryTranscript, func(n int) ([]keel.Message, error) {
		if n < 0 || n > len(r.messages) {
			return nil, fmt.Errorf("transcript has %d messages, %d asked", len(r.messages), n)
		}
		return r.messages[:n], nil
	}); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, QueryHistory, func(q HistoryQuery) (HistoryPage, error) {
		return pageHistory(r.messages, r.revision(), q), nil
	}); err != nil {
		return err
	}
	cancels := workflow.GetSignalChannel(ctx, SignalCancel)
	workflow.Go(ctx, func(gctx workflow.Context) {
		for {
			cancels.Receive(gctx, nil)
			r.requestCancel()
		}
	})
	return nil
}

// requestCancel starts cooperative cancellation. It is idempotent.
func (r *run) requestCancel() {
	if r.outcome != nil {
		return
	}
	if r.state != keel.StateCancelling {
		r.state = keel.StateCancelling
	}
	r.cancelWork()
}

// cancelled reports whether the run is being cancelled, by the cancel
// signal or by a Temporal cancellation request (the Web UI's Cancel).
func (r *run) cancelled() bool { return r.work.Err() != nil }

func (r *run) revision() int64 {
	if r.outcome != nil {
		return r.outcome.Revision
	}
	return r.in.Revision
}

// emit records a durable event with the next sequence number.
func (r *run) emit(ev keel.Event) {
	env, err := keel.Seal(ev, r.in.SessionID, r.in.RunID, workflow.Now(r.root))
	if err != nil {
		// Event types are plain structs: failing to encode one is a bug.
		panic(err)
	}
	r.seq++
	env.Seq = r.seq
	r.events = append(r.events, env)
}

func (r *run) loop() {
	r.emit(keel.RunStarted{Number: r.in.Number, Revision: r.in.Revision, Prompt: r.in.Prompt, Model: r.cfg.Model})
	r.messages = append(r.messages, keel.UserMessage(r.in.Prompt))
	for {
		if r.cancelled() {
			r.finishCancelled("")
			return
		}
		if r.step >= r.cfg.MaxSteps {
			r.finishFailed(&keel.Error{Code: keel.CodeMaxSteps,
				Message: fmt.Sprintf("run reached its limit of %d steps", r.cfg.MaxSteps)}, "")
			return
		}
		r.step++
		r.emit(keel.StepStarted{Step: r.step,
			EstimatedContextTokens: keel.EstimateTokens(r.cfg.System, r.messages) + r.toolTokens})
		res, partial, err := r.modelTurn()
		if err != nil {
			if r.cancelled() {
				r.finishCancelled(partial)
			} else {
				r.finishFailed(err, partial)
			}
			return
		}
		r.toolTokens = res.ToolTokens
		r.messages = append(r.messages, res.Response.Message())
		if len(res.Response.ToolCalls) == 0 {
			r.finishCompleted(res.Response.Text)
			return
		}
		r.runTools(res)
		if r.cancelled() {
			r.finishCancelled("")
			return
		}
	}
}

func (r *run) finishCompleted(text string) {
	rev := r.in.Revision + 1
	r.emit(keel.RunCompleted{Revision: rev, Text: text, Steps: r.step, Usage: r.usage})
	r.finish(keel.StatusCompleted, rev, text, nil)
}

// finishCancelled commits what can be kept: the partial text of an
// interrupted turn becomes an aborted assistant message (reasoning is never
// kept); tool calls already have their interrupted results.
func (r *run) finishCancelled(partial string) {
	r.keepPartial(partial)
	rev := r.in.Revision + 1
	r.emit(keel.RunCancelled{Revision: rev})
	r.finish(keel.StatusCancelled, rev, "", nil)
}

func (r *run) finishFailed(err *keel.Error, partial string) {
	r.keepPartial(partial)
	rev := r.in.Revision + 1
	r.emit(keel.RunFailed{Code: err.Code, Message: err.Message, Retryable: err.Retryable, Revision: rev})
	r.finish(keel.StatusFailed, rev, "", err)
}

func (r *run) keepPartial(partial string) {
	if partial != "" {
		r.messages = append(r.messages, keel.Message{Role: keel.RoleAssistant, Content: partial, Aborted: true})
	}
}

func (r *run) finish(status keel.RunStatus, rev int64, text string, err *keel.Error) {
	r.outcome = &keel.Outcome{
		RunID: r.in.RunID, Number: r.in.Number, Status: status, Text: text, Steps: r.step,
		Revision: rev, Usage: r.usage, UsageTotal: r.usageTotal, Error: err,
	}
	switch status {
	case keel.StatusCompleted:
		r.state = keel.StateCompleted
	case keel.StatusFailed:
		r.state = keel.StateFailed
	default:
		r.state = keel.StateIdle
	}
	// Search attributes are best effort: a run must end even where they
	// are not registered.
	_ = workflow.UpsertTypedSearchAttributes(r.root, AttrState.ValueSet(string(status)))
}

// internalError is the failure of code that should not fail.
func internalError(format string, args ...any) *keel.Error {
	return &keel.Error{Code: keel.CodeInternal, Message: fmt.Sprintf(format, args...)}
}

var _ = temporal.ErrNoData
