package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
)

// baseline measures n bare Temporal workflows at once, each running
// activities that stream as long as StreamScript's turns, without
// heartbeats, on a worker with Temporal's default options.
func (s *stack) baseline(ctx context.Context) (PhaseFigures, error) {
	ph := phase{name: "baseline", streamActivity: baselineActivityName}
	stop, pid, err := s.startBaselineWorker(ctx, "baseline")
	if err != nil {
		return PhaseFigures{}, err
	}
	defer stop()
	ph.workerPID = pid
	s.say("baseline: warm-up workflow")
	warm, err := s.tc.ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{
		ID: fmt.Sprintf("bench-baseline-%d-warm", s.n), TaskQueue: BaselineTaskQueue,
	}, baselineWorkflowName, BaselineInput{Chunks: []int{1, 1}, Delay: time.Millisecond})
	if err == nil {
		err = warm.Get(ctx, nil)
	}
	if err != nil {
		return PhaseFigures{}, fmt.Errorf("warm-up workflow: %w", err)
	}

	in := streamingBaselineInput()
	ph.session = func(ctx context.Context, i int, cancel bool) sessionResult {
		ctx, stop := context.WithTimeout(ctx, sessionTimeout)
		defer stop()
		return s.baselineSession(ctx, fmt.Sprintf("bench-baseline-%d-%04d", s.n, i), in, cancel)
	}
	f, results, err := s.run(ctx, ph)
	if err != nil {
		return f, err
	}
	err = s.phaseHistories(ctx, &f, results, []string{"Workflow"}, len(in.Chunks))
	return f, err
}

// startBaselineWorker starts the bare worker (which runs the shaped
// baseline too) in a process of its own when the options say how, else in
// this one; pid is 0 in this process.
func (s *stack) startBaselineWorker(ctx context.Context, phase string) (stop func(), pid int, err error) {
	if s.opts.BaselineWorker != nil {
		s.say("%s: starting a bare worker process", phase)
		p, err := s.opts.BaselineWorker(ctx, s.workerConfig())
		if err != nil {
			return nil, 0, err
		}
		return p.Stop, p.PID, nil
	}
	s.say("%s: starting a bare worker in this process", phase)
	wc, err := s.srv.Dial(ctx, sdkclient.Options{})
	if err != nil {
		return nil, 0, err
	}
	w := NewBaselineWorker(wc)
	if err := w.Start(); err != nil {
		wc.Close()
		return nil, 0, err
	}
	return func() { w.Stop(); wc.Close() }, 0, nil
}

// baselineSession starts one workflow and waits for its result; to
// cancel, it cancels the workflow while its first activity streams. The
// activity does not heartbeat, so it never learns of the cancel: the
// workflow stops waiting for it (Temporal's default) and closes.
func (s *stack) baselineSession(ctx context.Context, id string, in BaselineInput, cancel bool) sessionResult {
	t0 := time.Now()
	run, err := s.tc.ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{ID: id, TaskQueue: BaselineTaskQueue},
		baselineWorkflowName, in)
	r := sessionResult{start: time.Since(t0), workflows: []execution{{id: id}}}
	if err != nil {
		r.outcome, r.err = outcomeFailed, fmt.Errorf("start: %w", err)
		return r
	}
	return s.awaitBare(ctx, run, t0, cancel, r)
}

// awaitBare waits for a bare workflow's result, timing the run from t0
// into r; to cancel, it cancels the workflow baselineCancelAfter after it
// was started and times the cancel to its cancelled result instead.
func (s *stack) awaitBare(ctx context.Context, run sdkclient.WorkflowRun, t0 time.Time, cancel bool, r sessionResult) sessionResult {
	if !cancel {
		err := run.Get(ctx, nil)
		r.run = time.Since(t0)
		if err != nil {
			r.outcome, r.err = outcomeFailed, fmt.Errorf("result: %w", err)
		}
		return r
	}
	select {
	case <-ctx.Done():
		return failed(ctx.Err(), "cancel")
	case <-time.After(baselineCancelAfter):
	}
	tc := time.Now()
	if err := s.tc.CancelWorkflow(ctx, run.GetID(), ""); err != nil {
		r.outcome, r.err = outcomeFailed, fmt.Errorf("cancel: %w", err)
		return r
	}
	err := run.Get(ctx, nil)
	r.cancel = time.Since(tc)
	var ce *temporal.CanceledError
	switch {
	case errors.As(err, &ce):
		r.outcome = outcomeCancelled
	case err == nil:
		r.outcome = outcomeCancelMissed
	default:
		r.outcome, r.err = outcomeFailed, fmt.Errorf("cancelled workflow: %w", err)
	}
	return r
}
