package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/provider/scripted"
	"github.com/keelrun/keel/server/store"
)

// sessionTimeout bounds one session of a measurement, from send to
// outcome, so a run that never ends fails the session instead of hanging
// the benchmark.
const sessionTimeout = 15 * time.Minute

// keel measures n keel sessions at once, each sending one prompt whose
// model is StreamScript, on a keel worker with its default options.
func (s *stack) keel(ctx context.Context) (PhaseFigures, error) {
	cfg := s.workerConfig()
	if err := seedWorkspace(cfg.Workspace); err != nil {
		return PhaseFigures{}, err
	}
	model, err := s.writeScript(cfg.Scripts, "stream", StreamScript())
	if err != nil {
		return PhaseFigures{}, err
	}
	warm, err := s.writeScript(cfg.Scripts, "warm", warmScript)
	if err != nil {
		return PhaseFigures{}, err
	}
	ph := phase{name: "keel", streamActivity: activities.ModelTurnName}
	if s.opts.KeelWorker != nil {
		s.say("keel: starting a keel worker process")
		p, err := s.opts.KeelWorker(ctx, cfg)
		if err != nil {
			return PhaseFigures{}, err
		}
		defer p.Stop()
		ph.workerPID = p.PID
	} else {
		s.say("keel: starting a keel worker in this process")
		stop, err := s.startInProcessKeelWorker(ctx, cfg)
		if err != nil {
			return PhaseFigures{}, err
		}
		defer stop()
	}
	kc, err := client.Dial(ctx, client.Options{Temporal: s.tc, DataConverter: store.NewDataConverter(s.codec)})
	if err != nil {
		return PhaseFigures{}, err
	}
	defer kc.Close()
	// The runs to be cancelled are followed live, to cancel them once
	// they stream.
	deltas, err := live.DialNATS(s.natsURL, live.NATSOptions{})
	if err != nil {
		return PhaseFigures{}, err
	}
	defer deltas.Close()

	s.say("keel: warm-up run")
	run, err := kc.NewSession().Send(ctx, "warm up", client.WithConfig(api.RunConfig{Model: warm}))
	if err == nil {
		_, err = run.Outcome(ctx)
	}
	if err == nil {
		// Settled, so that what it still bills is not a measured run's.
		err = s.settleSessions(ctx, []sessionResult{{workflows: []execution{{id: run.Session().ID()}}}})
	}
	if err != nil {
		return PhaseFigures{}, fmt.Errorf("warm-up run: %w", err)
	}

	runCfg := api.RunConfig{Model: model, Tools: []string{"list_files"}}
	ph.session = func(ctx context.Context, i int, cancel bool) sessionResult {
		ctx, stop := context.WithTimeout(ctx, sessionTimeout)
		defer stop()
		return keelSession(ctx, kc, deltas, fmt.Sprintf("bench-%d-%04d", s.n, i), runCfg, cancel)
	}
	ph.settle = s.settleSessions
	f, results, err := s.run(ctx, ph)
	if err != nil {
		return f, err
	}
	err = s.phaseHistories(ctx, &f, results, []string{"Session"}, len(StreamTurns()))
	return f, err
}

// settleTimeout bounds settleSessions: a session whose run's execution
// does not continue as new fails the measurement instead of hanging it.
const settleTimeout = 5 * time.Minute

// settleSessions waits until the sessions of the runs settled. A run runs
// in its session's execution, for the benchmark's new sessions the first,
// which continues as new after the run. The next execution's first
// workflow task comes after the run's outcome, but every run of a long
// session starts with one, so it counts as the run's: this waits for it,
// with history long polls, then names the first execution for the run's
// history.
func (s *stack) settleSessions(ctx context.Context, results []sessionResult) error {
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	for i, r := range results {
		if len(r.workflows) != 1 {
			continue
		}
		session := r.workflows[0].id
		d, err := s.tc.DescribeWorkflowExecution(ctx, session, "")
		if err != nil {
			return fmt.Errorf("session %s: %w", session, err)
		}
		first := d.GetWorkflowExecutionInfo().GetFirstRunId()
		results[i].workflows = []execution{{id: session, runID: first}}
		if r.outcome == outcomeFailed {
			continue
		}
		closed, err := s.awaitEvent(ctx, session, first, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT, nil)
		if err != nil {
			return fmt.Errorf("session %s: %w", session, err)
		}
		next := closed.GetWorkflowExecutionContinuedAsNewEventAttributes().GetNewExecutionRunId()
		if next == "" {
			return fmt.Errorf("session %s: its run's execution ended with %s, not continued as new", session, closed.GetEventType())
		}
		if _, err := s.awaitEvent(ctx, session, next, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT, func(ev *historypb.HistoryEvent) bool {
			return ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
		}); err != nil {
			return fmt.Errorf("session %s: %w", session, err)
		}
	}
	return nil
}

// awaitEvent long-polls an execution's history for the first event that
// match accepts (nil: any), and returns it.
func (s *stack) awaitEvent(ctx context.Context, id, runID string, filter enumspb.HistoryEventFilterType, match func(*historypb.HistoryEvent) bool) (*historypb.HistoryEvent, error) {
	it := s.tc.GetWorkflowHistory(ctx, id, runID, true, filter)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, err
		}
		if match == nil || match(ev) {
			return ev, nil
		}
	}
	return nil, fmt.Errorf("execution %s closed without the event awaited", runID)
}

// keelSession sends one prompt in a new session and waits for its
// outcome; to cancel, it waits for the run's first delta, lets it stream
// a little, then cancels it.
func keelSession(ctx context.Context, kc *client.Client, deltas live.Channel, id string, cfg api.RunConfig, cancel bool) sessionResult {
	var sub live.Subscription
	if cancel {
		var err error
		if sub, err = deltas.Subscribe(ctx, id, live.SubscribeOptions{}); err != nil {
			return failed(err, "subscribe")
		}
		defer sub.Close()
	}
	t0 := time.Now()
	run, err := kc.Session(id).Send(ctx, "stream, please", client.WithConfig(cfg))
	r := sessionResult{start: time.Since(t0)}
	if err != nil {
		r.outcome, r.err = outcomeFailed, fmt.Errorf("send: %w", err)
		return r
	}
	r.workflows = []execution{{id: id}}
	if !cancel {
		out, err := run.Outcome(ctx)
		r.run = time.Since(t0)
		if err == nil && out.Status != keel.StatusCompleted {
			err = fmt.Errorf("status %s", out.Status)
		}
		if err != nil {
			r.outcome, r.err = outcomeFailed, fmt.Errorf("outcome: %w", err)
			return r
		}
		return r
	}

	if err := firstDelta(ctx, sub); err != nil {
		r.outcome, r.err = outcomeFailed, fmt.Errorf("waiting for the first delta: %w", err)
		return r
	}
	select {
	case <-ctx.Done():
		return failed(ctx.Err(), "cancel")
	case <-time.After(cancelAfterFirstDelta):
	}
	tc := time.Now()
	if err := run.Cancel(ctx); err != nil {
		r.outcome, r.err = outcomeFailed, fmt.Errorf("cancel: %w", err)
		return r
	}
	out, err := run.Outcome(ctx)
	r.cancel = time.Since(tc)
	switch {
	case errors.Is(err, keel.ErrCancelled):
		r.outcome = outcomeCancelled
	case err == nil && out.Status == keel.StatusCompleted:
		r.outcome = outcomeCancelMissed
	default:
		r.outcome, r.err = outcomeFailed, fmt.Errorf("cancelled run: %+v, %v", out, err)
	}
	return r
}

// firstDelta waits for a text delta on sub.
func firstDelta(ctx context.Context, sub live.Subscription) error {
	for {
		env, err := sub.Next(ctx)
		var lagged *live.LaggedError
		switch {
		case errors.As(err, &lagged):
			continue
		case err != nil:
			return err
		case env.Type == keel.TypeTextDelta:
			return nil
		}
	}
}

// writeScript writes a scripted model as NAME.json in the workers'
// scripts directory, where a worker in any process finds it, and returns
// its model spec, scripted:NAME.
func (s *stack) writeScript(dir, name string, sc *scripted.Script) (string, error) {
	b, err := scriptJSON(sc)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, name+scripted.Ext), b, 0o600); err != nil {
		return "", err
	}
	return "scripted:" + name, nil
}

// seedWorkspace creates the workspace with a few files for list_files.
func seedWorkspace(dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, "src"), 0o755); err != nil {
		return err
	}
	for name, text := range map[string]string{
		"README.md": "# bench\n", "src/main.go": "package main\n\nfunc main() {}\n", "notes.txt": "streaming\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			return err
		}
	}
	return nil
}
