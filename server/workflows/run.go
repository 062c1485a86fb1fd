package workflows

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/instrument"
	"github.com/keelrun/keel/server/hook"
)

// run is one run of a session: the loop, and the parts it drives. Each
// part keeps its own state and reaches the rest of the run only through
// what it was given (the event log's emit, the contexts, and the parts it
// needs):
//
//   - journal: the durable events; meter: the usage.
//   - transcript: the messages the model reads.
//   - steering: input staged for the next step boundary (steering.go).
//   - hostInput: questions to the host and their answers (hostinput.go).
//   - tools: tool batches and detached jobs (tools.go).
//   - modelTurns: a model turn and its retry budget (model.go).
//   - compactor: summarizing the older transcript (compact.go).
//
// The run itself decides the loop, the state the session displays, and the
// terminal commit. The session commits what the run leaves (session.go).
type run struct {
	in    runInput
	cfg   api.RunConfig
	rules Rules
	// root is the execution's context; work is cancelled when the run is.
	root, work workflow.Context
	cancelWork workflow.CancelFunc
	// onState receives the run's state changes: the session shows them.
	onState func(keel.SessionState)
	// began is when the run started (its execution may have waited idle
	// for its prompt before).
	began time.Time

	journal    *journal
	meter      *meter
	transcript *transcript
	steering   *steering
	host       *hostInput
	tools      *tools
	model      *modelTurns
	compactor  *compactor
	hooks      *hooks

	// toolTokens is the last known estimate of the tool schemas' size.
	toolTokens int
	// workerMaxSteps is the worker's step cap, as the last model turn
	// reported it (0: none).
	workerMaxSteps int

	step    int
	state   keel.SessionState
	outcome *keel.Outcome
	// startErr ends the run as it starts: the agent it names is gone.
	startErr *keel.Error
	// stopErr ends the run: a hook stopped it, or failed it
	// (docs/contract.md §23). It cancels the run's work as a cancel
	// does, and the run ends failed instead of cancelled.
	stopErr *keel.Error
	// inputs counts the boundary inputs applied, for their IDs.
	inputs int
	// reportUp, set in a child session, tells the parent what host-input
	// requests are open (delegate.go).
	reportUp func()
}

// runInput is what a run starts from: its prompt and configuration, and
// the session's state before it.
type runInput struct {
	SessionID string
	RunID     string
	Number    int
	Revision  int64
	BaseSeq   int64
	Prompt    string
	// Attachments are the prompt's (api.SendRequest.Attachments).
	Attachments []keel.Attachment
	Transcript  []keel.Message
	Config      api.RunConfig
	// SessionSpent is what the session's earlier runs spent, for its
	// session budget (docs/contract.md §20).
	SessionSpent keel.Usage
	// Delegations counts the session's delegations before this run, so
	// that its children's paths never repeat (docs/contract.md §21.3).
	Delegations int
}

func newRun(ctx workflow.Context, in runInput, rules Rules, onState func(keel.SessionState)) *run {
	info := workflow.GetInfo(ctx)
	r := &run{in: in, cfg: in.Config.WithDefaults(), rules: rules, root: ctx, onState: onState,
		state: keel.StateRunning, began: workflow.Now(ctx)}
	r.work, r.cancelWork = workflow.WithCancel(ctx)
	r.journal = newJournal(ctx, in)
	emit := r.journal.emit
	r.meter = &meter{emit: emit, session: in.SessionSpent}
	r.transcript = newTranscript(info.WorkflowExecution, in.Transcript)
	r.steering = newSteering(emit)
	r.host = newHostInput(in.RunID, emit, r.requestsChanged)
	r.tools = &tools{cfg: r.cfg, sessionID: in.SessionID, runID: in.RunID, root: ctx, work: r.work,
		emit: emit, lastSeq: r.journal.lastSeq, host: r.host, meter: r.meter,
		kids:      &delegations{sessionID: in.SessionID, runID: in.RunID, count: in.Delegations, changed: r.requestsChanged},
		stepsLeft: func() int { return r.stepLimit() - r.step - r.tools.kids.steps }}
	r.model = &modelTurns{cfg: r.cfg, sessionID: in.SessionID, runID: in.RunID, root: ctx, work: r.work,
		emit: emit, lastSeq: r.journal.lastSeq, meter: r.meter, transcript: r.transcript}
	r.compactor = &compactor{cfg: r.cfg, sessionID: in.SessionID, runID: in.RunID, root: ctx, work: r.work,
		emit: emit, meter: r.meter, transcript: r.transcript}
	r.hooks = &hooks{sessionID: in.SessionID, runID: in.RunID, emit: emit, heartbeat: r.cfg.HeartbeatAfter.Std(),
		maxInput: rules.limits().PromptBytes, stop: r.stop}
	r.tools.hooks = r.hooks
	return r
}

func (r *run) status() api.RunStatus {
	return api.RunStatus{RunID: r.in.RunID, State: r.state, Step: r.step, LastSeq: r.journal.seq,
		Outcome: r.outcome, Usage: r.meter.total, Revision: r.revision(),
		Requests: append(r.host.open(), r.tools.kids.open()...), Staged: r.steering.stagedIDs(), Jobs: r.tools.jobIDs(),
		Children: r.tools.kids.refs()}
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

// setState changes the run's state; the session shows it until the run
// ends.
func (r *run) setState(st keel.SessionState) {
	if r.state == st {
		return
	}
	r.state = st
	if r.outcome == nil {
		r.onState(st)
	}
}

// requestsChanged follows a change in the open host-input requests, the
// run's own or its children's: the state, and a child session's report to
// its parent.
func (r *run) requestsChanged() {
	r.refreshState()
	if r.reportUp != nil {
		r.reportUp()
	}
}

// refreshState derives the state from what is open.
func (r *run) refreshState() {
	switch {
	case r.outcome != nil:
	case r.cancelled():
		r.setState(keel.StateCancelling)
	case r.host.waiting() || len(r.tools.kids.open()) > 0:
		r.setState(keel.StateWaitingForHostInput)
	default:
		r.setState(keel.StateRunning)
	}
}

func (r *run) loop() {
	emit := r.journal.emit
	emit(keel.RunStarted{Number: r.in.Number, Revision: r.in.Revision, Prompt: r.in.Prompt, Model: r.cfg.Model,
		Agent: r.cfg.Agent})
	r.transcript.add(keel.Message{Role: keel.RoleUser, Content: r.in.Prompt, Attachments: r.in.Attachments})
	if err := r.cfg.Validate(); err != nil {
		r.finishFailed(err.(*keel.Error), "")
		return
	}
	if r.startErr != nil {
		r.finishFailed(r.startErr, "")
		return
	}
	r.hookBoundary(keel.HookRunStart, "")
	for {
		if r.cancelled() {
			r.endCancelled("")
			return
		}
		r.boundary()
		r.compactor.maybeCompact(r.step, r.toolTokens, r.tools.busy())
		if r.cancelled() {
			r.endCancelled("")
			return
		}
		if limit := r.stepLimit(); r.step+r.tools.kids.steps >= limit {
			r.finishFailed(&keel.Error{Code: keel.CodeMaxSteps,
				Message: fmt.Sprintf("run reached its limit of %d steps", limit)}, "")
			return
		}
		if r.hookBoundary(keel.HookBeforeStep, ""); r.cancelled() {
			r.endCancelled("")
			return
		}
		r.step++
		emit(keel.StepStarted{Step: r.step,
			EstimatedContextTokens: keel.EstimateTokens(r.cfg.System, r.transcript.messages) + r.toolTokens})
		res, partial, err := r.model.turn(r.step)
		if err != nil {
			if r.cancelled() {
				r.endCancelled(partial)
			} else {
				r.finishFailed(err, partial)
			}
			return
		}
		r.toolTokens = res.ToolTokens
		r.workerMaxSteps = res.MaxSteps
		r.transcript.add(res.Response.Message())
		if len(res.Response.ToolCalls) > 0 {
			r.transcript.add(r.tools.runBatch(r.step, res)...)
			continue
		}
		// The model ended its turn. Staged steering, finished detached
		// jobs, or jobs still running keep the run going.
		if r.waitForMore() {
			continue
		}
		// Boundary input before the commit makes the run go on.
		if r.hookBoundary(keel.HookBeforeCommit, res.Response.Text) {
			continue
		}
		if r.cancelled() {
			r.endCancelled("")
			return
		}
		r.finishCompleted(res.Response.Text, res.Answer)
		return
	}
}

// stop ends the run with err, the first a hook gave: its work is
// cancelled, and the loop ends it failed (endCancelled).
func (r *run) stop(err *keel.Error) {
	if r.stopErr == nil {
		r.stopErr = err
	}
	r.cancelWork()
}

// endCancelled ends a run whose work was cancelled: failed if a hook
// stopped it, cancelled otherwise.
func (r *run) endCancelled(partial string) {
	if r.stopErr != nil {
		r.finishFailed(r.stopErr, partial)
		return
	}
	r.finishCancelled(partial)
}

// hookBoundary runs the hooks at a run boundary (run_start, before_step,
// before_commit; text is the end-turn response at before_commit) and
// applies the boundary input they bring, unless the run is being ended
// by then: input the run will not read never enters its transcript. It
// reports whether input was applied.
func (r *run) hookBoundary(p keel.HookPoint, text string) bool {
	if !r.hooks.at(p) {
		return false
	}
	c := hook.Call{Point: p, SessionID: r.in.SessionID, RunID: r.in.RunID, Step: r.step}
	switch p {
	case keel.HookRunStart:
		c.Prompt = r.in.Prompt
	case keel.HookBeforeStep:
		c.Step = r.step + 1
	case keel.HookBeforeCommit:
		c.Text = text
	}
	v := r.hooks.call(r.work, c, strconv.Itoa(c.Step))
	if v.stopped || r.cancelled() {
		return false
	}
	for _, in := range v.inputs {
		r.inputs++
		id := fmt.Sprintf("%s-input-%d", r.in.RunID, r.inputs)
		r.journal.emit(keel.BoundaryInputApplied{InputID: id, Source: in.source, Point: p, Step: c.Step, Text: in.text})
		r.transcript.add(keel.Message{Role: keel.RoleUser, Content: in.text, InputID: id})
	}
	return len(v.inputs) > 0
}

// hookEnd runs the hooks at run_end, with how the run ended, before its
// terminal event: they cannot change it, and their failures are recorded
// only. They run even when the run was cancelled.
func (r *run) hookEnd(status keel.RunStatus, text string, err *keel.Error) {
	if !r.hooks.at(keel.HookRunEnd) {
		return
	}
	ctx, _ := workflow.NewDisconnectedContext(r.root)
	r.hooks.call(ctx, hook.Call{Point: keel.HookRunEnd, SessionID: r.in.SessionID, RunID: r.in.RunID, Step: r.step,
		Outcome: &hook.Outcome{Status: status, Text: text, Error: err}}, "end")
}

// stepLimit is the run's step limit: its own, or the worker's if smaller.
// The worker's comes recorded with each turn's result, so a replay sees
// the limit the run saw.
func (r *run) stepLimit() int {
	if r.workerMaxSteps > 0 && r.workerMaxSteps < r.cfg.MaxSteps {
		return r.workerMaxSteps
	}
	return r.cfg.MaxSteps
}

// boundary is a model-step boundary: results of detached jobs that
// finished enter history in completion order, then staged steering.
func (r *run) boundary() {
	r.transcript.add(r.tools.takeFinished()...)
	r.transcript.add(r.steering.apply()...)
}

// waitForMore decides, at an end of turn, whether the run goes on. It
// waits for a detached job while any runs and nothing else is pending.
func (r *run) waitForMore() bool {
	more := func() bool { return r.steering.pending() || r.tools.jobsFinished() }
	if more() {
		return true
	}
	if !r.tools.busy() {
		return false
	}
	_ = workflow.Await(r.work, more)
	return !r.cancelled()
}

// finishCompleted commits a run whose model ended its turn; answer is the
// final text as JSON when the run has an output schema (answer.go).
func (r *run) finishCompleted(text string, answer json.RawMessage) {
	r.hookEnd(keel.StatusCompleted, text, nil)
	rev := r.in.Revision + 1
	r.journal.emit(keel.RunCompleted{Revision: rev, Text: text, Steps: r.step, Usage: r.meter.kept, UsageTotal: r.terminalUsage(), Answer: answer})
	r.finish(keel.StatusCompleted, rev, text, nil)
	r.outcome.Answer = answer
}

// finishCancelled commits what can be kept: the partial text of an
// interrupted turn becomes an aborted assistant message (reasoning is never
// kept); unresolved tool calls get interrupted results; detached jobs are
// cancelled first.
func (r *run) finishCancelled(partial string) {
	r.settle(partial)
	r.hookEnd(keel.StatusCancelled, "", nil)
	rev := r.in.Revision + 1
	r.journal.emit(keel.RunCancelled{Revision: rev, UsageTotal: r.terminalUsage()})
	r.finish(keel.StatusCancelled, rev, "", nil)
}

func (r *run) finishFailed(err *keel.Error, partial string) {
	r.settle(partial)
	r.hookEnd(keel.StatusFailed, "", err)
	rev := r.in.Revision + 1
	r.journal.emit(keel.RunFailed{Code: err.Code, Message: err.Message, Retryable: err.Retryable, Revision: rev,
		UsageTotal: r.terminalUsage()})
	r.finish(keel.StatusFailed, rev, "", err)
}

// terminalUsage is the usage_total of the run's terminal event: what the
// run spent, abandoned attempts included (docs/contract.md §20.2).
func (r *run) terminalUsage() *keel.Usage {
	u := r.meter.total
	return &u
}

// settle closes everything still open before a terminal commit: detached
// jobs are cancelled (their interrupted results enter history), open
// host-input requests are closed, and partial output is kept.
func (r *run) settle(partial string) {
	r.transcript.add(r.tools.stopJobs()...)
	r.host.closeAll()
	if partial != "" {
		r.transcript.add(keel.Message{Role: keel.RoleAssistant, Content: partial, Aborted: true})
	}
}

func (r *run) finish(status keel.RunStatus, rev int64, text string, err *keel.Error) {
	r.outcome = &keel.Outcome{
		RunID: r.in.RunID, Number: r.in.Number, Status: status, Text: text, Steps: r.step,
		Revision: rev, Usage: r.meter.kept, UsageTotal: r.meter.total, Error: err, Seq: r.journal.lastSeq(),
	}
	switch status {
	case keel.StatusCompleted:
		r.state = keel.StateCompleted
	case keel.StatusFailed:
		r.state = keel.StateFailed
	default:
		r.state = keel.StateIdle
	}
	// The SDK's workflow metrics handler records nothing while replaying,
	// and metrics leave no trace in history.
	instrument.RunFinished(workflow.GetMetricsHandler(r.root), string(status), workflow.Now(r.root).Sub(r.began))
}

// internalError is the failure of code that should not fail.
func internalError(format string, args ...any) *keel.Error {
	return &keel.Error{Code: keel.CodeInternal, Message: fmt.Sprintf(format, args...)}
}
