package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/carry"
	"github.com/keelrun/keel/internal/delegation"
	"github.com/keelrun/keel/internal/instrument"
	"github.com/keelrun/keel/server/activities"
)

// A session is one Session workflow (ID = session ID); each of its runs is
// one execution of it (docs/contract.md §1). An execution waits, idle, for
// a prompt (the first arrives with the update-with-start that creates the
// session), runs it, commits it, and continues as new with the session's
// state. A prompt that arrives during the run waits in the queue and runs
// in the next execution.

// session is one execution of a Session workflow. What outlives the
// execution is st, the state handed from each execution to the next at
// continue-as-new (handover.go); every other field is this execution's
// own.
type session struct {
	id    string
	root  workflow.Context
	rules Rules
	// shape is the session's (api.SessionInput.Shape), chosen by the
	// client that started it and kept by every execution and child, so
	// that a client of keel v0.1.0, which reads commit markers, follows
	// the sessions it starts (lean).
	shape int
	// cfg holds the session's defaults for its runs (SessionInput.Config);
	// limits bound what the session keeps in memory.
	cfg    api.RunConfig
	limits api.HandOverLimits
	// delegated is set for a child session, which runs one task and
	// returns result to its parent (child.go).
	delegated *api.Delegation
	result    *delegation.DelegationResult

	// st is the carried state. Its Queue is written only at hand-over:
	// while the execution lasts, the queue is queue.
	st carry.SessionCarry

	// queue holds the accepted prompts that wait for their run; run is
	// the active run, nil while the session is idle.
	queue []*pendingRun
	run   *run
	// ran is set once this execution committed its run.
	ran bool
	// admitting counts the sends accepted and not yet queued; waiters the
	// outcome updates waiting.
	admitting, waiters int
	// checked is set once the session learned whether keel is shut down.
	checked bool
	// noStore is set once the worker said it has no content store.
	noStore bool
	// movingOn is set once the execution is about to continue as new;
	// moveAsked by the move signal (keel upgrade).
	movingOn, moveAsked bool
	// reported are the host-input requests a child session last reported
	// to its parent.
	reported []string
	// sinks are the event sinks this execution delivers to (sinks.go);
	// ended is set once the execution's workflow function returns.
	sinks sinks
	ended bool
	// tasks tells query answers which workflow task they reflect.
	tasks taskWatch
}

// pendingRun is an accepted prompt, queued or running.
type pendingRun struct {
	number int
	req    api.SendRequest
	// waiting is set while a send waits for this run to start; started
	// once it did (or failed to), with result or err for the send.
	waiting, started bool
	result           api.SendResult
	err              error
	// trace is the span of the send that asked for the run (the tracing
	// interceptor's, under instrument.SpanContextKey), nil without one.
	// It is never carried across continue-as-new.
	trace any
}

func sessionWorkflow(ctx workflow.Context, in carry.SessionInput, rules Rules) (*delegation.DelegationResult, error) {
	s := &session{id: in.SessionID, root: ctx, rules: rules, shape: in.Shape, cfg: in.Config, limits: in.HandOver.WithDefaults(),
		st: carry.SessionCarry{State: keel.StateIdle}}
	err := s.main(ctx, in)
	// No delivery starts in the task that ends the execution.
	s.ended = true
	return s.result, err
}

// main is the session's life in this execution.
func (s *session) main(ctx workflow.Context, in carry.SessionInput) error {
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
	} else if in.Conversation != nil {
		// No session started before this release has a conversation in
		// its input, so their histories never come here and replay as
		// they did: no version marker is needed (and none is recorded,
		// which a lean session avoids).
		if err := s.startConversation(in.Conversation); err != nil {
			return err
		}
	}
	if err := s.registerHandlers(ctx); err != nil {
		return err
	}
	if !s.checked && s.lean() {
		s.checkInTurns()
	} else if !s.checked {
		// v0.1.0: a new session asked with a local activity.
		workflow.Go(ctx, s.checkRuntime)
	}
	s.watchTasks(ctx)
	if s.lean() {
		s.startLean(ctx)
	} else {
		// v0.1.0: commit markers.
		announce(ctx, s.lastSeq, func() bool { return s.movingOn }, func() []string { return s.rules.Sinks }, s.startSinks)
	}
	for {
		if s.ran && s.delegated != nil {
			// A child session's one run is committed: its outcome goes
			// back to the parent, and the session ends (child.go).
			s.result = &delegation.DelegationResult{Outcome: *s.st.Last, Undelivered: s.sinkLogs()}
			return nil
		}
		if s.ran {
			if err := s.moveOn(ctx); err != nil {
				return err
			}
			// A prompt arrived while the execution settled: it runs
			// here, and the next settled point moves on.
		}
		if err := workflow.Await(ctx, func() bool { return len(s.queue) > 0 || s.moveAsked }); err != nil {
			// Cancelled while idle: nothing runs, nothing to commit.
			s.endUnrun(keel.StatusCancelled, nil)
			return nil
		}
		if s.delegated != nil && !s.admitDelegated(ctx) {
			return nil
		}
		if len(s.queue) == 0 {
			// Idle and asked to move: the next execution starts on the
			// current build and waits there.
			s.moveAsked = false
			if s.quiet(ctx) {
				return s.handOver(ctx)
			}
			continue
		}
		p := s.queue[0]
		s.queue = s.queue[1:]
		s.runPrompt(ctx, p)
		if ctx.Err() != nil {
			// The run was cancelled through Temporal (the Web UI's
			// Cancel); the session lives on, and a prompt that arrived
			// meanwhile still runs.
			ctx, _ = workflow.NewDisconnectedContext(ctx)
		}
	}
}

// runPrompt runs one accepted prompt and commits it.
func (s *session) runPrompt(ctx workflow.Context, p *pendingRun) {
	s.st.Runs++
	p.number = s.st.Runs
	cfg, startErr := s.startConfig(ctx, p)
	runID := keel.RunID(s.id, p.number)
	rctx := ctx
	if p.trace != nil {
		// The run's spans go under the send's, not the session's, whose
		// span ends only when the execution does.
		rctx = workflow.WithValue(rctx, instrument.SpanContextKey, p.trace)
	}
	spent := s.st.Usage
	r := newRun(rctx, runInput{SessionID: s.id, RunID: runID, Number: p.number, Revision: s.st.Revision,
		BaseSeq: s.st.Seq, Prompt: p.req.Prompt, Attachments: p.req.Attachments, Transcript: s.st.Transcript, Config: cfg, SessionSpent: spent,
		Delegations: s.st.Delegations}, s.rules, s.setState)
	r.startErr = startErr
	if startErr == nil {
		r.hooks.named, r.startErr = startHooks(ctx, s.rules, cfg.Hooks)
	}
	if d := s.delegated; d != nil {
		r.tools.kids.depth, r.tools.kids.relay, r.model.relay = d.Depth, d.Relay, d.Relay
		r.reportUp = func() { s.reportRequests(ctx, r) }
	}
	r.tools.kids.adopt, r.tools.kids.shape = s.adoptSinkLogs, s.shape
	if s.lean() {
		s.leanRun(r)
	}
	p.result = api.SendResult{RunID: runID, Number: p.number, Revision: s.st.Revision, BaseSeq: s.st.Seq,
		Execution: workflow.GetInfo(ctx).WorkflowExecution.RunID}
	p.started = true
	s.run = r
	s.st.State = keel.StateRunning
	// One upsert names the run for the Web UI's list and keel's queries;
	// a lean execution makes none (api.ShapeLean): readers ask the state
	// query instead.
	if !s.lean() {
		_ = workflow.UpsertTypedSearchAttributes(ctx, api.AttrState.ValueSet(string(keel.StateRunning)),
			api.AttrRunNumber.ValueSet(int64(p.number)), api.AttrModel.ValueSet(cfg.Model))
	}

	r.loop()

	s.run = nil
	s.commit(r)
}

// commit installs a finished run: its events, messages, revision, usage
// and outcome.
func (s *session) commit(r *run) {
	msgs, replaced := r.transcript.result()
	mark := carry.RunMark{Run: s.st.Runs, Start: len(s.st.Transcript), BaseRevision: s.st.Revision, BaseSeq: s.st.Seq}
	for _, ev := range r.journal.events {
		s.appendEvent(ev)
	}
	if replaced {
		s.st.Transcript = msgs
	} else {
		s.st.Transcript = append(s.st.Transcript, msgs...)
	}
	o := *r.outcome
	s.st.Revision = o.Revision
	s.st.Usage = s.st.Usage.Add(o.UsageTotal)
	s.st.Delegations = max(s.st.Delegations, r.tools.kids.count)
	s.st.Last = &o
	s.rememberOutcome(o)
	s.markRun(mark, replaced)
	s.ran = true
	switch o.Status {
	case keel.StatusCompleted:
		s.setState(keel.StateCompleted)
	case keel.StatusFailed:
		s.setState(keel.StateFailed)
	default:
		s.setState(keel.StateIdle)
	}
}

// appendEvent adds an event to the session's log with the next sequence.
func (s *session) appendEvent(ev keel.Envelope) {
	ev.Seq = s.st.Seq + 1
	s.st.Tail = append(s.st.Tail, ev)
	s.st.Seq = ev.Seq
}

// tailBase is the sequence before the first event held in memory: the
// events up to it are in segments, in the content store.
func (s *session) tailBase() int64 { return s.st.Seq - int64(len(s.st.Tail)) }

// lastSeq is the sequence of the session's latest durable event, the
// active run's included.
func (s *session) lastSeq() int64 {
	if s.run != nil {
		return s.run.journal.seq
	}
	return s.st.Seq
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
	s.st.Shutdown = s.st.Shutdown || down
	s.checked = true
}

// activeRef names the active run, nil while the session is idle.
func (s *session) activeRef() *api.RunRef {
	if s.run == nil {
		return nil
	}
	return &api.RunRef{RunID: s.run.in.RunID, Number: s.run.in.Number, BaseSeq: s.run.in.BaseSeq}
}

func (s *session) setState(st keel.SessionState) {
	if s.st.State == st {
		return
	}
	s.st.State = st
	if !s.lean() {
		_ = workflow.UpsertTypedSearchAttributes(s.root, api.AttrState.ValueSet(string(st)))
	}
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
