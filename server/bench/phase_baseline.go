package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
)

// bareSession drives one bare workflow (or shaped session) with ID id
// through its run of in, cancelling it mid-stream if cancel is set.
type bareSession func(ctx context.Context, id string, in BaselineInput, cancel bool) sessionResult

// bare measures n sessions of a bare phase at once (the baseline, the
// update-with-start baseline, the shaped one), each running activities
// that stream as long as StreamScript's turns, without heartbeats, on a
// worker with Temporal's default options, after one short warm-up session;
// kinds name the workflows of a session, for its histories.
func (s *stack) bare(ctx context.Context, name string, kinds []string, session bareSession) (PhaseFigures, error) {
	ph := phase{name: name, streamActivity: baselineActivityName}
	stop, pid, err := s.startBaselineWorker(ctx, name)
	if err != nil {
		return PhaseFigures{}, err
	}
	defer stop()
	ph.workerPID = pid
	s.say("%s: warm-up session", name)
	warm := BaselineInput{Chunks: []int{1, 1}, Delay: time.Millisecond}
	if r := session(ctx, fmt.Sprintf("bench-%s-%d-warm", name, s.n), warm, false); r.err != nil {
		return PhaseFigures{}, fmt.Errorf("warm-up session: %w", r.err)
	}
	in := streamingBaselineInput()
	ph.session = func(ctx context.Context, i int, cancel bool) sessionResult {
		ctx, stop := context.WithTimeout(ctx, sessionTimeout)
		defer stop()
		return session(ctx, fmt.Sprintf("bench-%s-%d-%04d", name, s.n, i), in, cancel)
	}
	f, results, err := s.run(ctx, ph)
	if err != nil {
		return f, err
	}
	err = s.phaseHistories(ctx, &f, results, kinds, len(in.Chunks))
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

// updateWithStartSession drives one bare workflow as a foreign client
// drives a keel session (docs/foreign-clients.md): an update-with-start of
// its "send" update, which the workflow accepts at once, the call waiting
// for the update's acceptance, with Temporal's own client alone; then it
// waits for the workflow's result as baselineSession does. The call is the
// fair baseline of a keel send.
func (s *stack) updateWithStartSession(ctx context.Context, id string, in BaselineInput, cancel bool) sessionResult {
	t0 := time.Now()
	err := updateWithStart(ctx, s.plain, sdkclient.StartWorkflowOptions{ID: id, TaskQueue: BaselineTaskQueue},
		baselineWorkflowName, in, sdkclient.UpdateWorkflowOptions{UpdateName: shapeUpdate, WaitForStage: sdkclient.WorkflowUpdateStageAccepted}, nil)
	r := sessionResult{start: time.Since(t0), workflows: []execution{{id: id}}}
	if err != nil {
		r.outcome, r.err = outcomeFailed, fmt.Errorf("update-with-start: %w", err)
		return r
	}
	return s.awaitBare(ctx, s.plain.GetWorkflow(ctx, id, ""), t0, cancel, r)
}

// updateWithStart sends an update to workflow start.ID, starting it
// (workflowType with input) when no execution of it is open, and waits
// for the update's stage; out, when set, receives its result. The
// conflict policy is the one keel's client sends with: USE_EXISTING.
func updateWithStart(ctx context.Context, c sdkclient.Client, start sdkclient.StartWorkflowOptions, workflowType string, input any,
	update sdkclient.UpdateWorkflowOptions, out any) error {
	start.WorkflowIDConflictPolicy = enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING
	h, err := c.UpdateWithStartWorkflow(ctx, sdkclient.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: c.NewWithStartWorkflowOperation(start, workflowType, input), UpdateOptions: update})
	if err != nil || out == nil {
		return err
	}
	return h.Get(ctx, out)
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
