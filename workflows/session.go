package workflows

import (
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/activities"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/instrument"
)

// session is the state of a Session workflow.
type session struct {
	id    string
	cfg   api.RunConfig
	root  workflow.Context
	rules Rules

	transcript []keel.Message
	revision   int64
	seq        int64
	// events is the tail of the durable log held in memory: sequences
	// tailBase+1 .. seq. The events up to tailBase are in segments, in
	// the content store.
	events   []keel.Envelope
	tailBase int64
	segments []api.EventSegment
	runs     int // runs started
	usage    keel.Usage
	state    keel.SessionState
	last     *keel.Outcome

	// limits bound this execution; handOvers counts the executions before
	// it. runsHere and tailBytesHere count what this execution added.
	limits        api.HandOverLimits
	handOvers     int
	runsHere      int
	tailBytesHere int
	// noStore is set once the worker said it has no content store.
	noStore bool
	// handOverCode is set once this execution recorded that it runs code
	// that hands over (see handOverDue).
	handOverCode bool

	queue    []*pendingRun
	active   *pendingRun
	shutdown bool
	// checked is set once the session learned whether keel is shut down.
	checked bool
	// admitting counts the sends accepted and not yet queued.
	admitting int

	// inline says each run executes in this execution (SessionInput.Inline);
	// current is that run while it is active, and movingOn is set once
	// the execution is about to continue as new (inline.go).
	inline   bool
	current  *run
	movingOn bool
	// moveInline is set once this two-workflow execution decided to hand
	// the session over to the inline shape (movesInline).
	moveInline bool
	// moveAsked is set by the move signal (inline.go).
	moveAsked bool
	// waiters counts the outcome updates waiting in this execution.
	waiters int

	// marks locate the committed runs in the transcript, and origin is
	// where the session was forked from (fork.go).
	marks  []api.RunMark
	origin *api.ForkOrigin

	// delegations counts the session's delegations so far; delegated is
	// set for a child session, which returns result (delegate.go).
	delegations int
	// once are the sends taken under a key (api.SendRequest.Once), at
	// most api.OnceRemembered, newest last, carried across hand-overs.
	once      []api.OnceSent
	delegated *api.Delegation
	result    *api.DelegationResult
	// reported are the host-input requests a child session last reported
	// to its parent.
	reported []string
}

// pendingRun is an accepted prompt, queued or running.
type pendingRun struct {
	number  int
	req     api.SendRequest
	started bool
	// waiting is set while a send waits for this run to start; issued once
	// the session asked Temporal to start its Run workflow.
	waiting bool
	issued  bool
	result  api.SendResult
	err     error
	cancel  workflow.CancelFunc
	// trace is the span of the send that asked for the run (the tracing
	// interceptor's, under instrument.SpanContextKey), nil without one.
	// It is never carried across continue-as-new.
	trace any
}

// SessionWorkflow is a conversation. It starts a Run child for each prompt
// it accepts through the "send" update, one at a time, and commits each
// run's messages, events and outcome when it ends. It applies no worker
// rules (Rules.Session does). A child session (SessionInput.Delegated)
// returns its one run's outcome; every other session continues as new
// and returns nothing.
func SessionWorkflow(ctx workflow.Context, in api.SessionInput) (*api.DelegationResult, error) {
	return sessionWorkflow(ctx, in, Rules{})
}

func sessionWorkflow(ctx workflow.Context, in api.SessionInput, rules Rules) (*api.DelegationResult, error) {
	s := &session{id: in.SessionID, cfg: in.Config, root: ctx, rules: rules, state: keel.StateIdle,
		limits: in.HandOver.WithDefaults(), inline: in.Inline}
	err := s.main(ctx, in)
	return s.result, err
}

// main is the session's life in this execution.
func (s *session) main(ctx workflow.Context, in api.SessionInput) error {
	if err := keel.ValidateSessionID(in.SessionID); err != nil {
		return temporal.NewNonRetryableApplicationError(err.Error(), string(keel.CodeInvalidInput), nil)
	}
	if in.Delegated != nil {
		s.startDelegated(in)
	}
	if in.Carry != nil {
		s.restore(in.Carry)
	} else if in.Fork != nil {
		if err := s.startFork(ctx, in.Fork); err != nil {
			return err
		}
	}
	if err := s.registerHandlers(ctx); err != nil {
		return err
	}
	if err := s.registerForkHandlers(ctx); err != nil {
		return err
	}
	if !s.checked {
		workflow.Go(ctx, s.checkRuntime)
	}
	announce(ctx, s.lastSeq, s.closing)
	if s.inline {
		return s.runInline(ctx)
	}
	for {
		if s.handOverDue(ctx) && s.quiet(ctx) {
			s.flushEvents(ctx)
			// A prompt that arrived while the events were stored runs
			// first; the next quiet point hands over.
			if s.quiet(ctx) && s.carryFits() {
				return s.handOver(ctx)
			}
		}
		if err := workflow.Await(ctx, func() bool { return len(s.queue) > 0 || s.moveAsked }); err != nil {
			// The Session workflow itself was cancelled: nothing runs now,
			// so there is nothing to commit.
			return nil
		}
		if len(s.queue) == 0 {
			// Idle and asked to move (keel upgrade): the session goes on
			// in the inline shape, on the current build.
			s.moveAsked = false
			if s.quiet(ctx) {
				s.moveInline = true
				s.flushEvents(ctx)
				return s.handOver(ctx)
			}
			continue
		}
		p := s.queue[0]
		s.queue = s.queue[1:]
		s.runOne(ctx, p)
		if ctx.Err() != nil {
			return nil
		}
	}
}

func (s *session) registerHandlers(ctx workflow.Context) error {
	if err := workflow.SetUpdateHandlerWithOptions(ctx, api.UpdateSend, s.send,
		workflow.UpdateHandlerOptions{Validator: s.validateSend}); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, api.QueryState, func() (api.SessionStatus, error) {
		st := api.SessionStatus{SessionID: s.id, State: s.state, Revision: s.revision, LastSeq: s.seq,
			Runs: s.runs, Queued: len(s.queue), Usage: s.usage, Last: s.last, Shutdown: s.shutdown,
			HandOvers: s.handOvers, Inline: s.inline, Parent: s.origin, Delegated: s.delegated}
		st.ActiveRun = s.activeRef()
		if s.current != nil {
			rs, _ := s.current.status()
			st.Run = &rs
		}
		return st, nil
	}); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, api.QueryEvents, func(q api.EventsQuery) (api.EventsPage, error) {
		page, err := s.pageEvents(q)
		page.ActiveRun = s.activeRef()
		return page, err
	}); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, api.QueryHistory, func(q api.HistoryQuery) (api.HistoryPage, error) {
		return pageHistory(s.transcript, s.revision, q), nil
	}); err != nil {
		return err
	}
	cancels := workflow.GetSignalChannel(ctx, api.SignalCancel)
	workflow.Go(ctx, func(gctx workflow.Context) {
		for {
			var req api.CancelRequest
			cancels.Receive(gctx, &req)
			if req.RunID != "" && s.current != nil && s.current.in.RunID != req.RunID {
				continue // a late cancel of a run that ended
			}
			s.cancelActive()
		}
	})
	states := workflow.GetSignalChannel(ctx, signalRunState)
	workflow.Go(ctx, func(gctx workflow.Context) {
		for {
			var sig runStateSignal
			states.Receive(gctx, &sig)
			// A late signal from a run that already ended must not
			// overwrite the session's state.
			if s.active != nil && s.active.started && s.active.result.RunID == sig.RunID {
				s.setState(sig.State)
			}
		}
	})
	moves := workflow.GetSignalChannel(ctx, api.SignalMove)
	workflow.Go(ctx, func(gctx workflow.Context) {
		for {
			moves.Receive(gctx, nil)
			s.moveAsked = true
		}
	})
	shutdowns := workflow.GetSignalChannel(ctx, api.SignalShutdown)
	workflow.Go(ctx, func(gctx workflow.Context) {
		for {
			shutdowns.Receive(gctx, nil)
			s.shutdown = true
			// A send that waits for its run to start is told, not left
			// waiting: its run will never start. (In a fresh execution a
			// shutdown signalled before the first task may be taken after
			// a send of that task was accepted.)
			for _, p := range s.queue {
				if p.waiting && !p.started {
					p.err, p.started = wireError(keel.ErrRuntimeShutdown), true
				}
			}
			s.queue = nil
			s.cancelActive()
		}
	})
	return nil
}

// checkRuntime asks, once, whether keel was shut down before this session
// started; sessions that were running at shutdown get a signal instead.
func (s *session) checkRuntime(ctx workflow.Context) {
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	})
	var down bool
	if err := workflow.ExecuteLocalActivity(lctx, activities.RuntimeStateName).Get(ctx, &down); err != nil {
		workflow.GetLogger(ctx).Warn("could not read the runtime state", "err", err)
	}
	s.shutdown = s.shutdown || down
	s.checked = true
}

// cancelActive asks the active run to stop; the run commits cooperatively.
func (s *session) cancelActive() {
	if s.current != nil {
		s.current.requestCancel()
		return
	}
	if s.active != nil && s.active.cancel != nil {
		s.active.cancel()
		if s.active.started {
			s.setState(keel.StateCancelling)
		}
	}
}

func (s *session) activeRef() *api.RunRef {
	if s.active == nil || !s.active.started {
		return nil
	}
	return &api.RunRef{RunID: s.active.result.RunID, Number: s.active.number, BaseSeq: s.active.result.BaseSeq,
		Inline: s.inline}
}

// closing reports whether this inline execution ends in the workflow
// task now being decided (it continues as new): its last events need no
// marker, since a reader takes a closed execution as committed whole and
// the next execution announces what it took over in its first task.
func (s *session) closing() bool { return s.inline && s.movingOn }

// lastSeq is the sequence of the session's latest durable event, the
// active inline run's included.
func (s *session) lastSeq() int64 {
	if s.current != nil {
		return s.current.journal.seq
	}
	return s.seq
}

// validateSend rejects a prompt before it enters history.
func (s *session) validateSend(req api.SendRequest) error {
	if s.delegated != nil {
		return wireError(keel.Errorf(keel.CodeNotAccepting,
			"session %s is a child of %s: it runs the task it was given and takes no prompts", s.id, s.delegated.Parent))
	}
	if len(req.Once) > api.MaxOnceBytes {
		return wireError(keel.Errorf(keel.CodeInvalidInput, "once: a send's key must be 1 to %d bytes, got %d", api.MaxOnceBytes, len(req.Once)))
	}
	if err := checkText("prompt", req.Prompt, s.rules.limits().PromptBytes); err != nil {
		return err
	}
	if _, ok := s.takenOnce(req.Once); ok {
		// Taken before: the handler answers what it answered then, and
		// starts nothing, so the run's checks do not apply; but the
		// request enters history as any send does, so its size does.
		return checkConfig(s.defaultsAhead().Merge(req.Config), s.rules.limits().ConfigBytes)
	}
	switch req.IfActive {
	case "", api.IfActiveReject, api.IfActiveQueue:
	default:
		return wireError(keel.Errorf(keel.CodeInvalidInput, "if_active %q: use %q or %q", req.IfActive, api.IfActiveReject, api.IfActiveQueue))
	}
	if err := validateSetDefault(req); err != nil {
		return err
	}
	cfg := s.defaultsAhead().Merge(req.Config)
	if err := cfg.Validate(); err != nil {
		return wireError(err.(*keel.Error))
	}
	if err := checkOutputSchema(cfg.OutputSchema); err != nil {
		return wireError(err)
	}
	if err := s.rules.admitsAgent(req, cfg); err != nil {
		return wireError(err)
	}
	if a, ok := s.rules.Agents[cfg.Agent]; ok {
		cfg = a.Apply(cfg)
	}
	if !s.rules.admitsModel(cfg.WithDefaults().Model) {
		return wireError(s.rules.modelRefused())
	}
	if err := s.rules.admitsBudgets(cfg); err != nil {
		return wireError(err)
	}
	if s.shutdown {
		return wireError(keel.ErrRuntimeShutdown)
	}
	if (s.active != nil || len(s.queue) > 0) && req.IfActive != api.IfActiveQueue {
		ref := "a run"
		if s.active != nil {
			ref = keel.RunID(s.id, s.active.number)
		}
		return wireError(&keel.Error{Code: keel.CodeRunActive, Message: ref + " is already active in this session"})
	}
	return s.checkSendLimits(req)
}

// send accepts a prompt. It returns once the run has started, or at once
// with Queued set when it waits behind another run.
func (s *session) send(ctx workflow.Context, req api.SendRequest) (api.SendResult, error) {
	if r, ok := s.takenOnce(req.Once); ok {
		r.Repeated = true
		return r, nil
	}
	res, err := s.admit(ctx, req)
	if err == nil && req.Once != "" {
		s.takeOnce(req.Once, res)
	}
	return res, err
}

// takenOnce returns the result of the send the session took under key,
// if it remembers one.
func (s *session) takenOnce(key string) (api.SendResult, bool) {
	if key == "" {
		return api.SendResult{}, false
	}
	for _, o := range s.once {
		if o.Key == key {
			return o.Result, true
		}
	}
	return api.SendResult{}, false
}

// takeOnce remembers a send taken under key, forgetting the oldest past
// api.OnceRemembered.
func (s *session) takeOnce(key string, res api.SendResult) {
	s.once = append(s.once, api.OnceSent{Key: key, Result: res})
	if n := len(s.once); n > api.OnceRemembered {
		s.once = append([]api.OnceSent(nil), s.once[n-api.OnceRemembered:]...)
	}
}

// admit queues a prompt and waits for its run to start, or returns at
// once with Queued set when it waits behind another run.
func (s *session) admit(ctx workflow.Context, req api.SendRequest) (api.SendResult, error) {
	// Until it is queued, the prompt counts against the queue's limit
	// (checkQueue): a validator cannot see the sends it let through that
	// wait here.
	s.admitting++
	err := workflow.Await(ctx, func() bool { return s.checked })
	s.admitting--
	if err != nil {
		return api.SendResult{}, err
	}
	if s.shutdown {
		return api.SendResult{}, wireError(keel.ErrRuntimeShutdown)
	}
	p := &pendingRun{number: s.runs + len(s.queue) + 1, req: req, trace: ctx.Value(instrument.SpanContextKey)}
	s.queue = append(s.queue, p)
	if s.active != nil || len(s.queue) > 1 {
		return api.SendResult{RunID: keel.RunID(s.id, p.number), Number: p.number, Queued: true, Inline: s.inline}, nil
	}
	p.waiting = true
	defer func() { p.waiting = false }()
	// Version 1 of send-at-start returned once the run's start was asked
	// for; under load, commands and outcomes asked for right away then met
	// a run without a workflow and timed out waiting (docs/contract.md
	// §11.1). Every send now waits for the start again; the version check
	// stays so that histories that recorded it replay.
	if !s.inline {
		// Inline sessions began after it: they record no marker.
		_ = workflow.GetVersion(ctx, sendAtStartChange, workflow.DefaultVersion, 1)
	}
	if err := workflow.Await(ctx, func() bool { return p.started }); err != nil {
		return api.SendResult{}, err
	}
	return p.result, p.err
}

// sendAtStartChange versions the send that returns at the run's start
// request instead of its start.
const sendAtStartChange = "send-at-start"

// runPriorityChange versions the priority a session gives its runs.
const runPriorityChange = "run-priority"

// runOne runs one accepted prompt as a Run child and commits its result.
func (s *session) runOne(ctx workflow.Context, p *pendingRun) {
	s.runs++
	p.number = s.runs
	cfg, startErr := s.startConfig(ctx, p)
	runID := keel.RunID(s.id, p.number)
	if startErr != nil {
		// Its agent is gone: the prompt fails without a run, as one whose
		// Run workflow never started does.
		s.runs--
		p.err, p.started = wireError(startErr), true
		return
	}
	cctx, cancel := workflow.WithCancel(ctx)
	p.cancel = cancel
	if p.trace != nil {
		// The run's spans go under the send's, not the session's, whose
		// span ends only when the session does.
		cctx = workflow.WithValue(cctx, instrument.SpanContextKey, p.trace)
	}
	opts := workflow.ChildWorkflowOptions{
		WorkflowID:          runID,
		ParentClosePolicy:   enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		WaitForCancellation: true,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			api.AttrSessionID.ValueSet(s.id), api.AttrState.ValueSet(string(keel.StatusActive)),
			api.AttrRunNumber.ValueSet(int64(p.number)), api.AttrModel.ValueSet(cfg.Model)),
		StaticSummary: fmt.Sprintf("run %d: %s", p.number, clip(p.req.Prompt, 80)),
	}
	// A run would inherit the session's priority; it takes a lower one, so
	// the session's tasks go first (api.SessionPriority). Histories from
	// before it started their runs without one and replay that way.
	if workflow.GetVersion(ctx, runPriorityChange, workflow.DefaultVersion, 1) == 1 {
		opts.Priority = temporal.Priority{PriorityKey: api.RunPriority}
	}
	cctx = workflow.WithChildOptions(cctx, opts)
	in := api.RunInput{SessionID: s.id, RunID: runID, Number: p.number, Revision: s.revision, BaseSeq: s.seq,
		Prompt: p.req.Prompt, Transcript: s.transcript, Config: cfg, SessionSpent: s.spent(), Delegations: s.delegations}
	s.active = p
	s.setState(keel.StateRunning)
	fut := workflow.ExecuteChildWorkflow(cctx, api.RunWorkflowName, in)
	p.result = api.SendResult{RunID: runID, Number: p.number, Revision: s.revision, BaseSeq: s.seq}
	p.issued = true

	var exec workflow.Execution
	if err := fut.GetChildWorkflowExecution().Get(ctx, &exec); err != nil {
		// The child never started (its ID taken, say): the prompt fails
		// without a run.
		s.active = nil
		s.runs--
		p.err = wireError(internalError("start run %s: %v", runID, err))
		p.started = true
		s.setState(keel.StateIdle)
		return
	}
	p.started = true

	var res api.RunResult
	err := fut.Get(ctx, &res)
	if err != nil {
		res = s.recoverRun(ctx, runID, exec.RunID, err)
	}
	s.commit(res)
	s.active = nil
}

// spent returns what the session's runs have spent so far, for the next
// run's session budget.
func (s *session) spent() *keel.Usage {
	u := s.usage
	return &u
}

// commit installs a finished run: its messages, events, revision and usage.
func (s *session) commit(res api.RunResult) {
	mark := api.RunMark{Run: s.runs, Start: len(s.transcript), BaseRevision: s.revision, BaseSeq: s.seq}
	for _, ev := range res.Events {
		if ev.Seq != s.seq+1 {
			// The run numbered from our sequence; a gap is a bug, and the
			// session log must stay dense, so stop at it.
			workflow.GetLogger(s.root).Error("run event out of sequence", "want", s.seq+1, "got", ev.Seq)
			break
		}
		s.events = append(s.events, ev)
		s.seq = ev.Seq
		s.tailBytesHere += ev.Size()
	}
	s.runsHere++
	if res.Replaced {
		s.transcript = res.Messages
	} else {
		s.transcript = append(s.transcript, res.Messages...)
	}
	o := res.Outcome
	s.revision = o.Revision
	s.usage = s.usage.Add(o.UsageTotal)
	s.delegations = max(s.delegations, res.Delegations)
	s.last = &o
	s.markRun(mark, res.Replaced)
	switch o.Status {
	case keel.StatusCompleted:
		s.setState(keel.StateCompleted)
	case keel.StatusFailed:
		s.setState(keel.StateFailed)
	default:
		s.setState(keel.StateIdle)
	}
}

// recoverRun builds the result of a run that ended without returning one
// (terminated by an operator, or failed in workflow code): the events it
// had recorded, read back from its workflow, then run.failed. Its messages
// are not committed; the transcript stays as it was before the run.
func (s *session) recoverRun(ctx workflow.Context, runID, execRunID string, cause error) api.RunResult {
	code, msg := keel.CodeInternal, "run workflow failed: "+cause.Error()
	var terminated *temporal.TerminatedError
	if errors.As(cause, &terminated) {
		code, msg = keel.CodeTerminated, "run workflow was terminated"
	}
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	actx := workflow.WithActivityOptions(dctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
		Summary:             "recover events of " + runID,
	})
	var rec activities.RecoverRunResult
	err := workflow.ExecuteActivity(actx, activities.RecoverRunName,
		activities.RecoverRunInput{WorkflowID: runID, RunID: execRunID, AfterSeq: s.seq}).Get(dctx, &rec)
	if err != nil {
		workflow.GetLogger(ctx).Warn("could not recover run events", "run", runID, "err", err)
	}
	var evs []keel.Envelope
	// What the run spent is the running total of its last usage fact: the
	// session counts it as it counts a run that ended on its own, so its
	// session budget holds (docs/contract.md §20.3).
	var spent keel.Usage
	next := s.seq + 1
	for _, ev := range rec.Events {
		if ev.Seq != next || ev.Terminal() {
			break
		}
		if ev.Type == keel.TypeUsageUpdated {
			if e, err := ev.Event(); err == nil {
				spent = e.(keel.UsageUpdated).Total
			}
		}
		evs = append(evs, ev)
		next++
	}
	rev := s.revision + 1
	failed, _ := keel.Seal(keel.RunFailed{Code: code, Message: msg, Revision: rev}, s.id, runID, workflow.Now(ctx))
	failed.Seq = next
	evs = append(evs, failed)
	// The run never reached its own terminal commit, where it counts
	// itself: count it here.
	instrument.RunLost(workflow.GetMetricsHandler(ctx))
	return api.RunResult{
		Outcome: keel.Outcome{RunID: runID, Number: s.runs, Status: keel.StatusFailed, Revision: rev,
			UsageTotal: spent, Error: &keel.Error{Code: code, Message: msg}},
		Events: evs,
	}
}

func (s *session) setState(st keel.SessionState) {
	if s.state == st {
		return
	}
	s.state = st
	_ = workflow.UpsertTypedSearchAttributes(s.root, api.AttrState.ValueSet(string(st)))
}

// wireError turns a keel error into the ApplicationError clients decode:
// its type is the keel code.
func wireError(e *keel.Error) error {
	return temporal.NewApplicationErrorWithOptions(e.Message, string(e.Code),
		temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{e}})
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
