package client

import (
	"context"
	"errors"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
)

// Where a run executes: in its session's own workflow (an inline session,
// one execution per run), or in a Run workflow of its own (sessions begun
// before inline sessions existed, until their next run moves them).
type runShape int

const (
	shapeUnknown runShape = iota
	shapeChild
	shapeInline
)

func shapeOf(inline bool) runShape {
	if inline {
		return shapeInline
	}
	return shapeChild
}

// inline reports whether the run executes in its session's workflow,
// finding out once for a handle that was not told (Session.Run).
func (r *Run) inline(ctx context.Context) (bool, error) {
	if r.shape != shapeUnknown {
		return r.shape == shapeInline, nil
	}
	st, err := r.s.State(ctx)
	if err != nil {
		return false, err
	}
	switch a := st.ActiveRun; {
	case a != nil && a.Number == r.Number:
		r.shape = shapeOf(a.Inline)
	case r.Number > st.Runs:
		// Queued, or not sent yet: it will run in the session's shape.
		r.shape = shapeOf(st.Inline)
	default:
		// It ended: a Run workflow of its ID exists unless it ran inline
		// (or is past the namespace's retention, where the log answers
		// either way).
		_, derr := r.s.c.tc.DescribeWorkflowExecution(ctx, r.ID, "")
		if derr == nil {
			r.shape = shapeChild
		} else if err := fromTemporal(derr, "run "+r.ID); !errors.Is(err, keel.ErrNotFound) {
			return false, err
		} else {
			r.shape = shapeInline
		}
	}
	return r.shape == shapeInline, nil
}

// inlineBase finds the sequence an inline run's events start after.
func (r *Run) inlineBase(ctx context.Context) (int64, error) {
	st, err := r.s.State(ctx)
	if err != nil {
		return 0, err
	}
	switch a := st.ActiveRun; {
	case a != nil && a.Number == r.Number:
		return a.BaseSeq, nil
	case r.Number > st.Runs:
		// Not started: its events come after everything there is now.
		if st.Run != nil {
			return st.Run.LastSeq, nil
		}
		return st.LastSeq, nil
	}
	// It ended: read the log from its start, keeping this run's events.
	return 0, nil
}

// inlineOutcome asks the session for the run's outcome with the outcome
// update, which answers once the run is committed. An execution that
// continues as new before the run has run says so, and the next one is
// asked; a run committed before the latest is read from the log.
func (r *Run) inlineOutcome(ctx context.Context) (keel.Outcome, error) {
	for {
		var o keel.Outcome
		updateID := newID()
		err := r.s.c.resumeUpdate(ctx, r.s.id, updateID, &o, func() (client.WorkflowUpdateHandle, error) {
			return r.s.c.tc.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
				WorkflowID: r.s.id, UpdateID: updateID, UpdateName: api.UpdateOutcome,
				Args: []any{api.OutcomeRequest{Number: r.Number}}, WaitForStage: client.WorkflowUpdateStageCompleted,
			})
		})
		if err == nil {
			return o, o.Err()
		}
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) && appErr.Type() == api.ErrTypeMoved {
			continue
		}
		if ctx.Err() != nil {
			return keel.Outcome{}, ctx.Err()
		}
		mapped := fromTemporal(err, "session "+r.s.id)
		if !errors.Is(mapped, keel.ErrNotFound) && !isClosedErr(err) {
			return keel.Outcome{}, mapped
		}
		st, serr := r.s.State(ctx)
		if serr != nil {
			return keel.Outcome{}, serr
		}
		if st.Runs < r.Number {
			if st.Closed != nil {
				return keel.Outcome{}, r.s.closedError(ctx)
			}
			return keel.Outcome{}, &keel.Error{Code: keel.CodeNotFound, Message: "run " + r.ID + " not found"}
		}
		if st.Closed != nil && (st.Last == nil || st.Last.Number < r.Number) {
			return r.closedOutcome(st)
		}
		return r.outcomeFromLog(ctx)
	}
}

// closedOutcome is the outcome of a run that was active when its
// session's execution stopped running (an operator terminated it, or its
// code failed): no code was left to record a terminal event, so the
// session's closed state says how it ended (docs/contract.md §3.1).
func (r *Run) closedOutcome(st api.SessionStatus) (keel.Outcome, error) {
	code, how := keel.CodeTerminated, "was terminated"
	if st.State == keel.StateFailed {
		code, how = keel.CodeInternal, "failed"
	}
	msg := "session " + r.s.id + " " + how + " while run " + r.ID + " was active"
	if st.Closed.Reason != "" {
		msg += ": " + st.Closed.Reason
	}
	e := &keel.Error{Code: code, Message: msg}
	o := keel.Outcome{RunID: r.ID, Number: r.Number, Status: keel.StatusFailed, Revision: st.Revision + 1, Error: e}
	return o, e
}

// inlineState is the run's state from its session's state query.
func (r *Run) inlineState(ctx context.Context) (api.RunStatus, error) {
	st, err := r.s.State(ctx)
	if err != nil {
		return api.RunStatus{}, err
	}
	switch {
	case st.Run != nil && st.Run.RunID == r.ID:
		return *st.Run, nil
	case st.Last != nil && st.Last.RunID == r.ID:
		o := *st.Last
		return api.RunStatus{RunID: r.ID, State: stateOf(o.Status), Step: o.Steps, Outcome: &o,
			Usage: o.UsageTotal, Revision: o.Revision}, nil
	case r.Number > st.Runs:
		return api.RunStatus{}, &keel.Error{Code: keel.CodeNotFound, Message: "run " + r.ID + " has not started"}
	}
	// An earlier run: its terminal event in the log says how it ended.
	o, err := r.outcomeFromLog(ctx)
	if err != nil && o.Status == "" {
		return api.RunStatus{}, err
	}
	return api.RunStatus{RunID: r.ID, State: stateOf(o.Status), Outcome: &o, Revision: o.Revision, Usage: o.Usage}, nil
}

func stateOf(s keel.RunStatus) keel.SessionState {
	switch s {
	case keel.StatusCompleted:
		return keel.StateCompleted
	case keel.StatusFailed:
		return keel.StateFailed
	}
	return keel.StateIdle
}

// forRun names the run in a command sent to an inline session, so that
// the session refuses it once another run is active.
func forRun(arg any, runID string) any {
	switch a := arg.(type) {
	case api.SteerRequest:
		a.RunID = runID
		return a
	case api.RetractRequest:
		a.RunID = runID
		return a
	case api.RespondRequest:
		a.RunID = runID
		return a
	}
	return arg
}
