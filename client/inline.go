package client

import (
	"context"
	"errors"


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

// inlineOutcome waits for the run's terminal event in the session's log,
// which a reader sees only once Temporal committed it, and reads the
// outcome from it. It sends no update: Temporal holds only a few in
// flight per execution, and Outcome may have many waiters. A session whose
// execution stopped running with the run active answers from its closed
// state.
func (r *Run) inlineOutcome(ctx context.Context) (keel.Outcome, error) {
	st, err := r.s.State(ctx)
	if err != nil {
		return keel.Outcome{}, err
	}
	switch {
	case r.Number > st.Runs+st.Queued && st.Closed == nil:
		return keel.Outcome{}, &keel.Error{Code: keel.CodeNotFound, Message: "run " + r.ID + " not found"}
	case st.Closed != nil && (st.Last == nil || st.Last.Number < r.Number):
		if r.Number > st.Runs {
			return keel.Outcome{}, r.s.closedError(ctx)
		}
		return r.closedOutcome(st)
	}
	o, err := r.outcomeFromLog(ctx)
	if o.Status == "" && err != nil {
		// The log ended without the run's terminal event: the session
		// stopped running while the run was active.
		if st, serr := r.s.State(ctx); serr == nil && st.Closed != nil && (st.Last == nil || st.Last.Number < r.Number) {
			return r.closedOutcome(st)
		}
	}
	return o, err
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
