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
	if s.opts.BaselineWorker != nil {
		s.say("baseline: starting a bare worker process")
		p, err := s.opts.BaselineWorker(ctx, s.workerConfig())
		if err != nil {
			return PhaseFigures{}, err
		}
		defer p.Stop()
		ph.workerPID = p.PID
	} else {
		s.say("baseline: starting a bare worker in this process")
		wc, err := s.srv.Dial(ctx, sdkclient.Options{})
		if err != nil {
			return PhaseFigures{}, err
		}
		defer wc.Close()
		w := NewBaselineWorker(wc)
		if err := w.Start(); err != nil {
			return PhaseFigures{}, err
		}
		defer w.Stop()
	}
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

// baselineSession starts one workflow and waits for its result; to
// cancel, it cancels the workflow while its first activity streams. The
// activity does not heartbeat, so it never learns of the cancel: the
// workflow stops waiting for it (Temporal's default) and closes.
func (s *stack) baselineSession(ctx context.Context, id string, in BaselineInput, cancel bool) sessionResult {
	t0 := time.Now()
	run, err := s.tc.ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{ID: id, TaskQueue: BaselineTaskQueue},
		baselineWorkflowName, in)
	r := sessionResult{start: time.Since(t0), workflows: []string{id}}
	if err != nil {
		r.outcome, r.err = outcomeFailed, fmt.Errorf("start: %w", err)
		return r
	}
	if !cancel {
		err := run.Get(ctx, nil)
		r.run = time.Since(t0)
		if err != nil {
			r.outcome, r.err = outcomeFailed, fmt.Errorf("result: %w", err)
			return r
		}
		return r
	}
	select {
	case <-ctx.Done():
		return failed(ctx.Err(), "cancel")
	case <-time.After(baselineCancelAfter):
	}
	tc := time.Now()
	if err := s.tc.CancelWorkflow(ctx, id, ""); err != nil {
		r.outcome, r.err = outcomeFailed, fmt.Errorf("cancel: %w", err)
		return r
	}
	err = run.Get(ctx, nil)
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
