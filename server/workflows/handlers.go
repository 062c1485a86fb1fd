package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/delegation"
	"github.com/keelrun/keel/server/activities"
)

// registerHandlers installs everything a session answers: the send and
// outcome updates (send.go, outcome.go), the active run's commands
// (steering, retraction, answers, cancellation; run commands.go), the
// lifecycle signals, forks and rewinds (fork.go), and the queries.
//
// Every decision is made in workflow code, one handler at a time, so each
// race (a retraction against the boundary that would apply the steer, an
// answer against a cancellation) has exactly one outcome, recorded in
// history.
func (s *session) registerHandlers(ctx workflow.Context) error {
	updates := []struct {
		name      string
		handler   any
		validator any
	}{
		{api.UpdateSend, s.send, s.validateSend},
		{api.UpdateOutcome, s.outcome, s.validateOutcome},
		{api.UpdateSteer, func(ctx workflow.Context, req api.SteerRequest) (api.SteerResult, error) {
			return s.run.steer(req), nil
		}, func(req api.SteerRequest) error {
			r, err := s.activeFor(req.RunID)
			if err != nil {
				return err
			}
			return r.validateSteer(req)
		}},
		{api.UpdateRetractSteering, func(ctx workflow.Context, req api.RetractRequest) (api.RetractResult, error) {
			return api.RetractResult{Result: s.run.steering.retract(req.SteeringID)}, nil
		}, func(req api.RetractRequest) error {
			// A run that ended keeps no steering to retract, whether or
			// not it still takes commands.
			if s.run == nil || (req.RunID != "" && req.RunID != s.run.in.RunID) {
				return notAccepting(req.RunID)
			}
			return validateRetract(req)
		}},
		{api.UpdateRespond, func(ctx workflow.Context, req api.RespondRequest) error {
			s.run.host.respond(req)
			return nil
		}, func(req api.RespondRequest) error {
			// An answer to a request of the active run is judged by the
			// request first: gone, answered or unknown says more than
			// "not accepting".
			if _, err := s.activeFor(req.RunID); err != nil && (s.run == nil || req.RunID != "") {
				return err
			}
			return s.run.validateRespond(req)
		}},
		{api.UpdateRewind, s.rewind, s.validateRewind},
	}
	for _, u := range updates {
		if err := workflow.SetUpdateHandlerWithOptions(ctx, u.name, u.handler,
			workflow.UpdateHandlerOptions{Validator: u.validator}); err != nil {
			return err
		}
	}
	if err := s.registerQueries(ctx); err != nil {
		return err
	}
	s.handleSignals(ctx)
	return nil
}

// activeFor is the run a command is for: the active one, if it is the run
// the command names (or the command names none).
func (s *session) activeFor(runID string) (*run, error) {
	if s.run == nil {
		return nil, wireError(keel.Errorf(keel.CodeNotAccepting, "session %s has no active run", s.id))
	}
	if runID != "" && runID != s.run.in.RunID {
		return nil, notAccepting(runID)
	}
	return s.run, s.run.accepting()
}

func notAccepting(runID string) error {
	return wireError(keel.Errorf(keel.CodeNotAccepting, "run %q no longer accepts commands", clip(runID, 80)))
}

// handleSignals serves the session's signals, each on a goroutine of its
// own. Steering and answers also arrive as signals, for callers that
// cannot wait for an answer (the temporal CLI's `workflow signal`); a
// refused one is logged and dropped, since a signal cannot report an
// error. Signals are re-run on replay, so their checks apply fixed limits,
// never the worker's Rules.
func (s *session) handleSignals(ctx workflow.Context) {
	signals := map[string]func(workflow.Context, workflow.ReceiveChannel){
		api.SignalCancel: func(ctx workflow.Context, ch workflow.ReceiveChannel) {
			var req api.CancelRequest
			ch.Receive(ctx, &req)
			if s.run != nil && (req.RunID == "" || req.RunID == s.run.in.RunID) {
				s.run.requestCancel()
			}
		},
		api.SignalMove: func(ctx workflow.Context, ch workflow.ReceiveChannel) {
			ch.Receive(ctx, nil)
			s.moveAsked = true
		},
		api.SignalShutdown: func(ctx workflow.Context, ch workflow.ReceiveChannel) {
			ch.Receive(ctx, nil)
			s.shutDown()
		},
		api.UpdateSteer: func(ctx workflow.Context, ch workflow.ReceiveChannel) {
			var req api.SteerRequest
			ch.Receive(ctx, &req)
			r, err := s.activeFor(req.RunID)
			if err == nil {
				err = r.validateSteerSignal(req)
			}
			if err != nil {
				workflow.GetLogger(ctx).Warn("steer signal dropped", "err", err)
				return
			}
			r.steer(req)
		},
		api.UpdateRespond: func(ctx workflow.Context, ch workflow.ReceiveChannel) {
			var req api.RespondRequest
			ch.Receive(ctx, &req)
			r := s.run
			var err error
			if r == nil || (req.RunID != "" && req.RunID != r.in.RunID) {
				err = fmt.Errorf("not for the active run")
			} else {
				err = r.validateRespondSignal(req)
			}
			if err != nil {
				workflow.GetLogger(ctx).Warn("respond signal dropped", "err", err)
				return
			}
			r.host.respond(req)
		},
		// What children report of their host-input requests (delegate.go).
		delegation.SignalChildRequests: func(ctx workflow.Context, ch workflow.ReceiveChannel) {
			var sig delegation.ChildRequests
			ch.Receive(ctx, &sig)
			if s.run != nil {
				s.run.tools.kids.childRequests(sig)
			}
		},
	}
	// In a fixed order: goroutines start in the order they are made, and
	// a replay must make them as the execution did.
	for _, name := range []string{api.SignalCancel, api.SignalMove, api.SignalShutdown, api.UpdateSteer,
		api.UpdateRespond, delegation.SignalChildRequests} {
		ch, handle := workflow.GetSignalChannel(ctx, name), signals[name]
		workflow.Go(ctx, func(gctx workflow.Context) {
			for {
				handle(gctx, ch)
			}
		})
	}
}

// shutDown marks keel shut down in this session: the queued prompts go,
// a send waiting for its run to start is told, and the active run is
// cancelled (docs/contract.md §13).
func (s *session) shutDown() {
	s.refuseQueued()
	if s.run != nil {
		s.run.requestCancel()
	}
}

// refuseQueued marks keel shut down and lets the queued prompts go.
func (s *session) refuseQueued() {
	s.st.Shutdown = true
	for _, p := range s.queue {
		if p.waiting && !p.started {
			p.err, p.started = wireError(keel.ErrRuntimeShutdown), true
		}
	}
	s.queue = nil
}

// registerQueries installs the state, events, history and fork_point
// queries, and the transcript query the model turn falls back on.
func (s *session) registerQueries(ctx workflow.Context) error {
	queries := []struct {
		name    string
		handler any
	}{
		{api.QueryState, func() (api.SessionStatus, error) {
			st := api.SessionStatus{SessionID: s.id, State: s.st.State, Revision: s.st.Revision, LastSeq: s.st.Seq,
				Runs: s.st.Runs, Queued: len(s.queue), Usage: s.st.Usage, Last: s.st.Last, Shutdown: s.st.Shutdown,
				HandOvers: s.st.HandOvers, Parent: s.st.Origin, Delegated: s.delegated, ActiveRun: s.activeRef()}
			if s.run != nil {
				rs := s.run.status()
				st.Run = &rs
			}
			return st, nil
		}},
		{api.QueryEvents, func(q api.EventsQuery) (api.EventsPage, error) {
			page, err := s.pageEvents(q)
			page.ActiveRun = s.activeRef()
			page.Execution, page.Task = workflow.GetInfo(ctx).WorkflowExecution.RunID, s.task(ctx)
			return page, err
		}},
		{api.QueryHistory, func(q api.HistoryQuery) (api.HistoryPage, error) {
			return pageHistory(s.st.Transcript, s.st.Revision, q), nil
		}},
		{api.QueryForkPoint, s.forkPoint},
		{activities.QueryTranscript, func(n int) ([]keel.Message, error) {
			if s.run == nil {
				return nil, fmt.Errorf("session %s has no active run", s.id)
			}
			return s.run.transcript.prefix(n)
		}},
	}
	for _, q := range queries {
		if err := workflow.SetQueryHandler(ctx, q.name, q.handler); err != nil {
			return err
		}
	}
	return nil
}
