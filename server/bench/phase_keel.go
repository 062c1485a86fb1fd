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
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

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
// model is StreamScript, on a keel worker with its default options, after
// one short warm-up run: through keel's Go client, or, when foreign is
// set, as a client in another language drives them (foreignSession).
func (s *stack) keel(ctx context.Context, foreign bool) (PhaseFigures, error) {
	name, prefix := "keel", "bench"
	if foreign {
		name, prefix = "foreign", "bench-foreign"
	}
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
	ph := phase{name: name, streamActivity: activities.ModelTurnName}
	if s.opts.KeelWorker != nil {
		s.say("%s: starting a keel worker process", name)
		p, err := s.opts.KeelWorker(ctx, cfg)
		if err != nil {
			return PhaseFigures{}, err
		}
		defer p.Stop()
		ph.workerPID = p.PID
	} else {
		s.say("%s: starting a keel worker in this process", name)
		stop, err := s.startInProcessKeelWorker(ctx, cfg)
		if err != nil {
			return PhaseFigures{}, err
		}
		defer stop()
	}
	session := s.foreignSession
	if !foreign {
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
		session = func(ctx context.Context, id string, cfg api.RunConfig, cancel bool) sessionResult {
			return keelSession(ctx, kc, deltas, id, cfg, cancel, s.opts.Follow)
		}
	}

	s.say("%s: warm-up run", name)
	r := session(ctx, fmt.Sprintf("%s-%d-warm", prefix, s.n), api.RunConfig{Model: warm}, false)
	if r.err == nil {
		// Settled, so that what it still bills is not a measured run's.
		r.err = s.settleSessions(ctx, []sessionResult{r})
	}
	if r.err != nil {
		return PhaseFigures{}, fmt.Errorf("warm-up run: %w", r.err)
	}

	runCfg := api.RunConfig{Model: model, Tools: []string{"list_files"}}
	ph.session = func(ctx context.Context, i int, cancel bool) sessionResult {
		ctx, stop := context.WithTimeout(ctx, sessionTimeout)
		defer stop()
		return session(ctx, fmt.Sprintf("%s-%d-%04d", prefix, s.n, i), runCfg, cancel)
	}
	ph.settle = s.settleSessions
	f, results, err := s.run(ctx, ph)
	if err != nil {
		return f, err
	}
	err = s.phaseHistories(ctx, &f, results, []string{"Session"}, len(StreamTurns()))
	return f, err
}

// foreignSession drives one keel session as a client in another language
// would, with Temporal's own client and keel's documented surfaces alone
// (docs/foreign-clients.md): an update-with-start of "send", waiting for
// its answer, then one "outcome" update for the run, asked again while
// the session answers that it moved on. To cancel, it signals "cancel"
// baselineCancelAfter after the send returned, as the bare phases cancel,
// and times the cancel to the cancelled outcome.
func (s *stack) foreignSession(ctx context.Context, id string, cfg api.RunConfig, cancel bool) sessionResult {
	t0 := time.Now()
	var sent api.SendResult
	err := updateWithStart(ctx, s.plain, sdkclient.StartWorkflowOptions{ID: id, TaskQueue: api.TaskQueue,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE},
		api.SessionWorkflowName, api.SessionInput{SessionID: id, Shape: api.ShapeLean},
		sdkclient.UpdateWorkflowOptions{UpdateName: api.UpdateSend, Args: []any{api.SendRequest{Prompt: "stream, please", Config: &cfg}},
			WaitForStage: sdkclient.WorkflowUpdateStageCompleted}, &sent)
	r := sessionResult{start: time.Since(t0)}
	if err != nil {
		r.outcome, r.err = outcomeFailed, fmt.Errorf("send: %w", err)
		return r
	}
	r.workflows = []execution{{id: id}}
	var tc time.Time
	if cancel {
		select {
		case <-ctx.Done():
			return failed(ctx.Err(), "cancel")
		case <-time.After(baselineCancelAfter):
		}
		tc = time.Now()
		if err := s.plain.SignalWorkflow(ctx, id, "", api.SignalCancel, nil); err != nil {
			r.outcome, r.err = outcomeFailed, fmt.Errorf("cancel: %w", err)
			return r
		}
	}
	out, err := foreignOutcome(ctx, s.plain, id, sent.Number)
	switch {
	case err != nil:
		r.outcome, r.err = outcomeFailed, fmt.Errorf("outcome: %w", err)
	case !cancel && out.Status == keel.StatusCompleted:
		r.run = time.Since(t0)
	case cancel && out.Status == keel.StatusCancelled:
		r.outcome, r.cancel = outcomeCancelled, time.Since(tc)
	case cancel && out.Status == keel.StatusCompleted:
		r.outcome = outcomeCancelMissed
	default:
		r.outcome, r.err = outcomeFailed, fmt.Errorf("outcome: status %s", out.Status)
	}
	return r
}

// foreignOutcome waits for run n of session id with the "outcome" update,
// sent again when the execution that took it continued as new first
// (api.ErrTypeMoved).
func foreignOutcome(ctx context.Context, c sdkclient.Client, id string, n int) (keel.Outcome, error) {
	for {
		var o keel.Outcome
		h, err := c.UpdateWorkflow(ctx, sdkclient.UpdateWorkflowOptions{WorkflowID: id, UpdateName: api.UpdateOutcome,
			Args: []any{api.OutcomeRequest{Run: n}}, WaitForStage: sdkclient.WorkflowUpdateStageCompleted})
		if err == nil {
			err = h.Get(ctx, &o)
		}
		var moved *temporal.ApplicationError
		if errors.As(err, &moved) && moved.Type() == api.ErrTypeMoved {
			continue
		}
		return o, err
	}
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
func keelSession(ctx context.Context, kc *client.Client, deltas live.Channel, id string, cfg api.RunConfig, cancel, follow bool) sessionResult {
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
		out, err := waitOrFollow(ctx, run, follow)
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

// waitOrFollow waits for the run's outcome, or, with follow, follows its
// events to the terminal event as `keel run` does.
func waitOrFollow(ctx context.Context, run *client.Run, follow bool) (keel.Outcome, error) {
	if !follow {
		return run.Outcome(ctx)
	}
	for env, err := range run.Events(ctx) {
		if err != nil {
			var lag *live.LaggedError
			if errors.As(err, &lag) {
				continue
			}
			return keel.Outcome{}, err
		}
		if env.RunID != run.ID || !env.Terminal() {
			continue
		}
		if env.Type != keel.TypeRunCompleted {
			return keel.Outcome{}, fmt.Errorf("run %s ended with %s", run.ID, env.Type)
		}
		return keel.Outcome{Status: keel.StatusCompleted}, nil
	}
	return keel.Outcome{}, fmt.Errorf("run %s: no terminal event", run.ID)
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
