package workflows

import (
	"fmt"
	"unicode/utf8"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/activities"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/instrument"
)

// An inline session runs each of its runs in its own execution and
// continues as new after it: one workflow per session, one execution per
// run (SessionInput.Inline, docs/ARCHITECTURE.md). An execution waits,
// idle, for a prompt; runs it with the same parts a Run workflow uses;
// commits it; and hands the session's state to the next execution, which
// waits for the next prompt or starts the one queued. Nothing else is
// started per run, and the session's log holds the run's events as they
// happen.

// runInline is the loop of an inline execution.
func (s *session) runInline(ctx workflow.Context) error {
	if err := s.registerInlineHandlers(ctx); err != nil {
		return err
	}
	for {
		if s.runsHere > 0 && s.delegated != nil {
			// A child session's one run is committed: its outcome goes
			// back to the parent, and the session ends (delegate.go).
			s.result = &api.DelegationResult{Outcome: *s.last}
			return nil
		}
		if s.runsHere > 0 {
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
		s.runHere(ctx, p)
		if ctx.Err() != nil {
			// The run was cancelled through Temporal; the session lives
			// on, and a prompt that arrived meanwhile still runs.
			ctx, _ = workflow.NewDisconnectedContext(ctx)
		}
	}
}

// runHere runs one accepted prompt in this execution and commits it.
func (s *session) runHere(ctx workflow.Context, p *pendingRun) {
	s.runs++
	p.number = s.runs
	cfg, startErr := s.startConfig(ctx, p)
	runID := keel.RunID(s.id, p.number)
	rctx := ctx
	if p.trace != nil {
		rctx = workflow.WithValue(rctx, instrument.SpanContextKey, p.trace)
	}
	r := newRun(rctx, api.RunInput{SessionID: s.id, RunID: runID, Number: p.number, Revision: s.revision,
		BaseSeq: s.seq, Prompt: p.req.Prompt, Transcript: s.transcript, Config: cfg, SessionSpent: s.spent(),
		Delegations: s.delegations})
	r.rules = s.rules
	r.onState = s.setState
	r.tools.current = true
	r.startErr = startErr
	if d := s.delegated; d != nil {
		r.tools.kids.depth, r.tools.kids.relay, r.model.relay = d.Depth, d.Relay, d.Relay
		r.reportUp = func() { s.reportRequests(ctx, r) }
	}
	p.result = api.SendResult{RunID: runID, Number: p.number, Revision: s.revision, BaseSeq: s.seq, Inline: true,
		Execution: workflow.GetInfo(ctx).WorkflowExecution.RunID}
	p.issued, p.started = true, true
	s.active, s.current = p, r
	s.state = keel.StateRunning
	// One upsert names the run for the Web UI's list and keel's queries.
	_ = workflow.UpsertTypedSearchAttributes(ctx, api.AttrState.ValueSet(string(keel.StateRunning)),
		api.AttrRunNumber.ValueSet(int64(p.number)), api.AttrModel.ValueSet(cfg.Model))

	r.loop()

	res := api.RunResult{Outcome: *r.outcome, Events: r.journal.events, Delegations: r.tools.kids.count}
	res.Messages, res.Replaced = r.transcript.result()
	s.current, s.active = nil, nil
	s.commit(res)
}

// moveOn ends this execution after its run: every handler finishes (an
// outcome update waiting for a later run is told to ask again), the
// events move to the content store when the tail grew past its limit,
// and the session continues as new. It returns nil without moving on
// when a prompt is waiting for its run to start: that run goes first.
func (s *session) moveOn(ctx workflow.Context) error {
	s.movingOn = true
	if !s.quiet(ctx) {
		s.movingOn = false
		return nil
	}
	if s.tailBytes() >= s.limits.TailBytes {
		s.flushEvents(ctx)
	}
	if !s.carryFits() {
		// Without a content store the state outgrew a continue-as-new
		// input: this execution keeps the session, as the two-workflow
		// shape did, until Temporal's own limits end it.
		workflow.GetLogger(ctx).Warn("session state too large to continue as new without a content store")
		s.movingOn = false
		s.runsHere = 0
		return nil
	}
	return s.handOver(ctx)
}

// tailBytes is the size of the events the session holds in memory.
func (s *session) tailBytes() int {
	n := 0
	for _, ev := range s.events {
		n += ev.Size()
	}
	return n
}

// registerInlineHandlers installs what an inline execution answers beside
// the session's own handlers: the run commands (the same as a Run
// workflow's, addressed to the session), the transcript query the model
// turn falls back on, and the outcome update.
func (s *session) registerInlineHandlers(ctx workflow.Context) error {
	// active is the run a command is for: the active one, if it is the
	// run the command names (a command names none from older clients).
	active := func(runID string) (*run, error) {
		if s.current == nil {
			return nil, wireError(keel.Errorf(keel.CodeNotAccepting, "session %s has no active run", s.id))
		}
		if runID != "" && runID != s.current.in.RunID {
			return nil, wireError(keel.Errorf(keel.CodeNotAccepting, "run %q no longer accepts commands", clip(runID, 80)))
		}
		return s.current, s.current.accepting()
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, api.UpdateSteer,
		func(ctx workflow.Context, req api.SteerRequest) (api.SteerResult, error) {
			return s.current.steer(req), nil
		},
		workflow.UpdateHandlerOptions{Validator: func(req api.SteerRequest) error {
			r, err := active(req.RunID)
			if err != nil {
				return err
			}
			return r.validateSteer(req)
		}}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, api.UpdateRetractSteering,
		func(ctx workflow.Context, req api.RetractRequest) (api.RetractResult, error) {
			return api.RetractResult{Result: s.current.steering.retract(req.SteeringID)}, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(req api.RetractRequest) error {
			if s.current == nil || (req.RunID != "" && req.RunID != s.current.in.RunID) {
				// As a Run workflow that closed: the run takes no commands.
				return wireError(keel.Errorf(keel.CodeNotAccepting, "run %q no longer accepts commands", clip(req.RunID, 80)))
			}
			return validateRetract(req)
		}}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, api.UpdateRespond,
		func(ctx workflow.Context, req api.RespondRequest) error { s.current.host.respond(req); return nil },
		workflow.UpdateHandlerOptions{Validator: func(req api.RespondRequest) error {
			if _, err := active(req.RunID); err != nil && (s.current == nil || req.RunID != "") {
				return err
			}
			return s.current.validateRespond(req)
		}}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, api.UpdateOutcome, s.outcome,
		workflow.UpdateHandlerOptions{Validator: s.validateOutcome}); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, activities.QueryTranscript, func(n int) ([]keel.Message, error) {
		if s.current == nil {
			return nil, fmt.Errorf("session %s has no active run", s.id)
		}
		return s.current.transcript.prefix(n)
	}); err != nil {
		return err
	}
	// What children report of their host-input requests (delegate.go).
	childReqs := workflow.GetSignalChannel(ctx, api.SignalChildRequests)
	workflow.Go(ctx, func(gctx workflow.Context) {
		for {
			var sig api.ChildRequests
			childReqs.Receive(gctx, &sig)
			if s.current != nil {
				s.current.tools.kids.childRequests(sig)
			}
		}
	})
	// Steering and answers as signals, for callers that cannot wait for
	// an answer; refused ones are logged and dropped (commands.go). The
	// cancel signal is the session's own (cancelActive).
	steers := workflow.GetSignalChannel(ctx, api.UpdateSteer)
	responds := workflow.GetSignalChannel(ctx, api.UpdateRespond)
	workflow.Go(ctx, func(gctx workflow.Context) {
		for {
			var req api.SteerRequest
			steers.Receive(gctx, &req)
			if r, err := active(req.RunID); err != nil {
				workflow.GetLogger(gctx).Warn("steer signal dropped", "err", err)
			} else if err := r.validateSteerSignal(gctx, req); err != nil {
				workflow.GetLogger(gctx).Warn("steer signal dropped", "err", err)
			} else {
				r.steer(req)
			}
		}
	})
	workflow.Go(ctx, func(gctx workflow.Context) {
		for {
			var req api.RespondRequest
			responds.Receive(gctx, &req)
			r := s.current
			if r == nil || (req.RunID != "" && req.RunID != r.in.RunID) {
				workflow.GetLogger(gctx).Warn("respond signal dropped: not for the active run")
			} else if err := r.validateRespondSignal(gctx, req); err != nil {
				workflow.GetLogger(gctx).Warn("respond signal dropped", "err", err)
			} else {
				r.host.respond(req)
			}
		}
	})
	return nil
}

// validateOutcome refuses, before it enters history, an outcome update
// for a run the session never accepted.
func (s *session) validateOutcome(req api.OutcomeRequest) error {
	if req.Run < 1 || req.Run > s.runs+len(s.queue)+s.admitting {
		return wireError(keel.Errorf(keel.CodeNotFound, "run %s not found", keel.RunID(s.id, req.Run)))
	}
	ended := s.last != nil && s.last.Number >= req.Run
	if req.NoWait && !ended {
		return wireError(keel.Errorf(keel.CodeRunActive, "run %s has not ended", keel.RunID(s.id, req.Run)))
	}
	if !ended && s.waiters >= api.MaxOutcomeWaiters {
		// Temporal refuses updates beyond its in-flight limit with an
		// error of its own; keel refuses first, with room left for sends
		// and commands.
		return wireError(keel.Errorf(keel.CodeTooMany,
			"session %s already has %d outcome updates waiting (the most it lets wait); ask with no_wait or follow the session's log",
			s.id, api.MaxOutcomeWaiters))
	}
	return nil
}

// outcome waits for run req.Number to be committed and answers its
// outcome. A run committed by an earlier execution is answered from the
// last outcome when it is the latest run, and is otherwise not found here
// (its terminal event in the log says it). While waiting for a run that a
// later execution will run, the answer is api.ErrTypeMoved: ask again.
func (s *session) outcome(ctx workflow.Context, req api.OutcomeRequest) (keel.Outcome, error) {
	done := func() bool { return s.last != nil && s.last.Number >= req.Run }
	if !done() {
		s.waiters++
		defer func() { s.waiters-- }()
	}
	// A Temporal cancellation of the execution cancels the run, not the
	// wait for its outcome.
	ctx, _ = workflow.NewDisconnectedContext(ctx)
	if err := workflow.Await(ctx, func() bool { return done() || s.movingOn }); err != nil {
		return keel.Outcome{}, err
	}
	switch {
	case done() && s.last.Number == req.Run:
		return plainOutcome(*s.last), nil
	case done():
		return keel.Outcome{}, wireError(keel.Errorf(keel.CodeNotFound,
			"run %s ended before run %d; its terminal event is in the session's log",
			keel.RunID(s.id, req.Run), s.last.Number))
	}
	return keel.Outcome{}, temporal.NewApplicationErrorWithOptions("session "+s.id+" continues as new; ask again",
		api.ErrTypeMoved, temporal.ApplicationErrorOptions{NonRetryable: true})
}

// plainOutcome is o as the outcome update answers it: a final text longer
// than api.MaxOutcomeText is cut, at a character boundary, and flagged, so
// that the answer is small enough to stay plain JSON (api.OutcomeRequest).
//
// A structured answer (keel.Outcome.Answer) counts with the text: when the
// two pass the limit together the answer is left out and TextCut set, so
// a reader takes both from the terminal event.
func plainOutcome(o keel.Outcome) keel.Outcome {
	if len(o.Text)+len(o.Answer) <= api.MaxOutcomeText {
		return o
	}
	o.Answer, o.TextCut = nil, true
	if len(o.Text) <= api.MaxOutcomeText {
		return o
	}
	n := api.MaxOutcomeText
	for n > 0 && !utf8.RuneStart(o.Text[n]) {
		n--
	}
	o.Text = o.Text[:n]
	return o
}
