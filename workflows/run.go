package workflows

import (
	"fmt"

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
	exec       workflow.Execution
	parent     *workflow.Execution

	seq    int64
	events []keel.Envelope
	// messages is the whole transcript: the session's (in.Transcript) then
	// this run's. shipped counts those already sent to a model turn.
	messages []keel.Message
	shipped  int
	// base is where the run's own messages start in messages; -1 once a
	// compaction replaced the session's part.
	base int
	// generation counts compactions (see activities.TranscriptRef).
	generation int
	// toolTokens is the last known estimate of the tool schemas' size.
	toolTokens int

	step       int
	state      keel.SessionState
	usage      keel.Usage // successful responses
	usageTotal keel.Usage // every physical request
	outcome    *keel.Outcome

	control
	jobQueue
}

// RunWorkflow runs one prompt to its end: model turn, tool calls, model
// turn, ... until the model ends its turn, the step limit is reached, a
// failure exhausts its retries, or the run is cancelled. Every path ends
// with exactly one terminal event and returns a RunResult (cancellation and
// failure are outcomes, not workflow errors).
func RunWorkflow(ctx workflow.Context, in RunInput) (*RunResult, error) {
	info := workflow.GetInfo(ctx)
	r := &run{
		in:       in,
		cfg:      in.Config.WithDefaults(),
		root:     ctx,
		seq:      in.BaseSeq,
		messages: append([]keel.Message(nil), in.Transcript...),
		base:     len(in.Transcript),
		state:    keel.StateRunning,
		exec:     info.WorkflowExecution,
		parent:   info.ParentWorkflowExecution,
	}
	r.control.init()
	r.work, r.cancelWork = workflow.WithCancel(ctx)
	if err := r.registerHandlers(ctx); err != nil {
		return nil, err
	}
	announce(ctx, func() int64 { return r.seq })
	r.loop()
	res := &RunResult{Outcome: *r.outcome, Events: r.events}
	if r.base < 0 {
		res.Messages, res.Replaced = r.messages, true
	} else {
		res.Messages = r.messages[r.base:]
	}
	return res, nil
}

func (r *run) registerHandlers(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, QueryState, r.status); err != nil {
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
	return r.registerControl(ctx)
}

func (r *run) status() (RunStatus, error) {
	st := RunStatus{RunID: r.in.RunID, State: r.state, Step: r.step, LastSeq: r.seq,
		Outcome: r.outcome, Usage: r.usageTotal, Revision: r.revision()}
	for _, h := range r.openRequests() {
		st.Requests = append(st.Requests, h.HostRequest)
	}
	for _, s := range r.staged {
		st.Staged = append(st.Staged, s.id)
	}
	for _, j := range r.running {
		st.Jobs = append(st.Jobs, j.call.ID)
	}
	return st, nil
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

// setState changes the run's state and tells the session, which shows it
// in its own state query. Only transitions are sent.
func (r *run) setState(st keel.SessionState) {
	if r.state == st {
		return
	}
	r.state = st
	// Cancelling is not sent: a signal costs this run an extra workflow
	// task right when it should wind down fast, and the run commits in
	// moments anyway (a cancel sent through the session sets it there).
	if r.parent != nil && r.outcome == nil && st != keel.StateCancelling {
		// Fire and forget: the session only displays it.
		workflow.SignalExternalWorkflow(r.root, r.parent.ID, "", signalRunState,
			runStateSignal{RunID: r.in.RunID, State: st})
	}
}

// refreshState derives the state from what is open.
func (r *run) refreshState() {
	switch {
	case r.outcome != nil:
	case r.cancelled():
		r.setState(keel.StateCancelling)
	case len(r.openRequests()) > 0:
		r.setState(keel.StateWaitingForHostInput)
	default:
		r.setState(keel.StateRunning)
	}
}

func (r *run) loop() {
	r.emit(keel.RunStarted{Number: r.in.Number, Revision: r.in.Revision, Prompt: r.in.Prompt, Model: r.cfg.Model})
	r.messages = append(r.messages, keel.UserMessage(r.in.Prompt))
	if err := r.cfg.Validate(); err != nil {
		r.finishFailed(err.(*keel.Error), "")
		return
	}
	for {
		if r.cancelled() {
			r.finishCancelled("")
			return
		}
		r.boundary()
		r.maybeCompact()
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
		if len(res.Response.ToolCalls) > 0 {
			r.runTools(res)
			continue
		}
		// The model ended its turn. Staged steering, finished detached
		// jobs, or jobs still running keep the run going.
		if r.waitForMore() {
			continue
		}
		if r.cancelled() {
			r.finishCancelled("")
			return
		}
		r.finishCompleted(res.Response.Text)
		return
	}
}

// boundary is a model-step boundary: results of detached jobs that
// finished enter history in completion order, then staged steering.
func (r *run) boundary() {
	for _, j := range r.finishedJobs {
		r.messages = append(r.messages, jobResultMessage(j))
	}
	r.finishedJobs = nil
	r.applySteering()
}

// waitForMore decides, at an end of turn, whether the run goes on. It
// waits for a detached job while any runs and nothing else is pending.
func (r *run) waitForMore() bool {
	if len(r.staged) > 0 || len(r.finishedJobs) > 0 {
		return true
	}
	if len(r.running) == 0 {
		return false
	}
	_ = workflow.Await(r.work, func() bool { return len(r.staged) > 0 || len(r.finishedJobs) > 0 })
	return !r.cancelled()
}

func (r *run) finishCompleted(text string) {
	rev := r.in.Revision + 1
	r.emit(keel.RunCompleted{Revision: rev, Text: text, Steps: r.step, Usage: r.usage})
	r.finish(keel.StatusCompleted, rev, text, nil)
}

// finishCancelled commits what can be kept: the partial text of an
// interrupted turn becomes an aborted assistant message (reasoning is never
// kept); unresolved tool calls get interrupted results; detached jobs are
// cancelled first.
func (r *run) finishCancelled(partial string) {
	r.settle(partial)
	rev := r.in.Revision + 1
	r.emit(keel.RunCancelled{Revision: rev})
	r.finish(keel.StatusCancelled, rev, "", nil)
}

func (r *run) finishFailed(err *keel.Error, partial string) {
	r.settle(partial)
	rev := r.in.Revision + 1
	r.emit(keel.RunFailed{Code: err.Code, Message: err.Message, Retryable: err.Retryable, Revision: rev})
	r.finish(keel.StatusFailed, rev, "", err)
}

// settle closes everything still open before a terminal commit: detached
// jobs are cancelled (their interrupted results enter history), open
// host-input requests are closed, and partial output is kept.
func (r *run) settle(partial string) {
	r.stopJobs()
	r.closeRequests()
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
	// Search attributes are best effort: the worker registers them at start.
	_ = workflow.UpsertTypedSearchAttributes(r.root, AttrState.ValueSet(string(status)))
}

// internalError is the failure of code that should not fail.
func internalError(format string, args ...any) *keel.Error {
	return &keel.Error{Code: keel.CodeInternal, Message: fmt.Sprintf(format, args...)}
}
