package client

import (
	"context"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/carry"
)

// Outcome waits for the run to end and for its session to commit it, and
// returns its outcome: after it returns, the session's state, history and
// log include the run. The error is nil for a completed run,
// keel.ErrCancelled for a cancelled one and the typed failure otherwise
// (match with errors.Is / errors.As). It works from any process at any time
// after the run started.
//
// It waits without asking the session to wait (Temporal holds only a few updates in flight per execution, and
// Outcome may have many waiters), and without queries where it can (each
// is a billable action). When Send learned the execution running the run,
// it long-polls that execution's close: the continue-as-new that follows
// the commit carries the outcome (the session's carried state), read with the
// client's data converter. Otherwise, or when the carried state cannot be
// read here (offloaded to a content store this client cannot reach, or
// the execution ran another run after it), it asks the session once
// without waiting and, failing that, reads the terminal event from the
// committed log.
func (r *Run) Outcome(ctx context.Context) (keel.Outcome, error) {
	if r.execution != "" {
		o, ok, err := r.carriedOutcome(ctx)
		if err != nil || ok {
			return o, err
		}
	}
	return r.askedOutcome(ctx)
}

// Checks for a commit that leaves the execution open start this long
// after Outcome does and double, up to openCheckMax.
const (
	openCheckFirst = 2 * time.Second
	openCheckMax   = 32 * time.Second
)

// carriedOutcome long-polls the close of the execution that runs the run
// and reads the outcome from the continue-as-new that follows the commit
// (carry.SessionCarry.Last, decoded with the client's data converter). A
// close-only poll returns at the close or when the server's long poll
// expires, not at every event the run adds, so waiting costs the server
// what waiting for a bare workflow's result does. The execution stays
// open after the commit only when a prompt reached it in the commit's
// workflow task, whose run then goes first: at expiries, openCheckFirst
// and then less often, the client reads the events since its last read
// for that (commitWatch), and asks the session without waiting if it
// did. ok is false when it cannot tell.
func (r *Run) carriedOutcome(ctx context.Context) (o keel.Outcome, ok bool, err error) {
	svc := r.s.c.tc.WorkflowService()
	exec := &commonpb.WorkflowExecution{WorkflowId: r.s.id, RunId: r.execution}
	w := commitWatch{run: r.Number, dc: r.s.c.dc}
	var closeToken []byte
	every := openCheckFirst
	check := time.Now().Add(every)
	for {
		resp, err := svc.GetWorkflowExecutionHistory(ctx, &workflowservice.GetWorkflowExecutionHistoryRequest{
			Namespace: r.s.c.namespace, Execution: exec, NextPageToken: closeToken, WaitNewEvent: true,
			HistoryEventFilterType: enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT,
		})
		if err != nil {
			return o, false, ctx.Err()
		}
		if evs := resp.GetHistory().GetEvents(); len(evs) > 0 {
			return r.closedWith(evs[len(evs)-1])
		}
		if closeToken = resp.GetNextPageToken(); closeToken == nil {
			return o, false, nil
		}
		if time.Now().Before(check) {
			continue
		}
		open, err := r.readForCommit(ctx, exec, &w)
		if err != nil {
			return o, false, ctx.Err()
		}
		if open {
			return r.noWaitOutcome(ctx)
		}
		every = min(2*every, openCheckMax)
		check = time.Now().Add(every)
	}
}

// closedWith reads the run's outcome from the event that closed its
// execution: a continue-as-new whose carried state holds it. Any other
// close (terminated, failed, cancelled) or another run's outcome there
// tells nothing.
func (r *Run) closedWith(ev *historypb.HistoryEvent) (o keel.Outcome, ok bool, err error) {
	can := ev.GetWorkflowExecutionContinuedAsNewEventAttributes()
	if can == nil {
		return o, false, nil
	}
	var in carry.SessionInput
	if r.s.c.dc.FromPayloads(can.GetInput(), &in) != nil || in.Carry == nil || in.Carry.Last == nil ||
		in.Carry.Last.Number != r.Number {
		return o, false, nil
	}
	o = *in.Carry.Last
	return o, true, o.Err()
}

// readForCommit reads exec's events after the last w saw, without
// waiting, and reports whether they show the run committed with the
// execution open. A read that does not wait pages through what there is
// and ends; the next starts again from the first page.
func (r *Run) readForCommit(ctx context.Context, exec *commonpb.WorkflowExecution, w *commitWatch) (bool, error) {
	var token []byte
	for {
		resp, err := r.s.c.historyPage(ctx, exec, token, false)
		if err != nil {
			return false, err
		}
		for _, ev := range resp.GetHistory().GetEvents() {
			if ev.GetEventId() <= w.read {
				continue
			}
			w.read = ev.GetEventId()
			if w.openAfterCommit(ev) {
				return true, nil
			}
		}
		if token = resp.GetNextPageToken(); token == nil {
			return false, nil
		}
	}
}

// commitWatch reads an execution's history, event by event, for a sign
// that run has been committed while the execution stays open. Two signs:
//
//   - a later run started in the execution: the send update that waited
//     for it completed with its number (any execution; a run starts only
//     once the one before it is committed);
//   - the commit's search-attribute upsert (KeelRunNumber = run, KeelState
//     its end state) followed by another timer or workflow task rather
//     than the continue-as-new of the same task: only an execution of
//     keel v0.1.0's shape upserts (a lean one, api.ShapeLean, does not).
type commitWatch struct {
	run int
	dc  converter.DataConverter
	// sends are the event IDs of the send updates accepted; mine and
	// committed follow the upserts.
	sends           map[int64]bool
	mine, committed bool
	// read is the ID of the last event read.
	read int64
}

func (w *commitWatch) openAfterCommit(ev *historypb.HistoryEvent) bool {
	if acc := ev.GetWorkflowExecutionUpdateAcceptedEventAttributes(); acc != nil {
		if acc.GetAcceptedRequest().GetInput().GetName() == api.UpdateSend {
			if w.sends == nil {
				w.sends = map[int64]bool{}
			}
			w.sends[ev.GetEventId()] = true
		}
		return false
	}
	if done := ev.GetWorkflowExecutionUpdateCompletedEventAttributes(); done != nil {
		var res api.SendResult
		return w.sends[done.GetAcceptedEventId()] && done.GetOutcome().GetSuccess() != nil &&
			w.dc.FromPayloads(done.GetOutcome().GetSuccess(), &res) == nil &&
			!res.Queued && !res.Repeated && res.Number > w.run
	}
	if up := ev.GetUpsertWorkflowSearchAttributesEventAttributes(); up != nil {
		fields := up.GetSearchAttributes().GetIndexedFields()
		var n int64
		var state keel.SessionState
		if p := fields[api.AttrRunNumber.GetName()]; p != nil && converter.GetDefaultDataConverter().FromPayload(p, &n) == nil {
			w.mine = n == int64(w.run)
		}
		if p := fields[api.AttrState.GetName()]; p != nil {
			_ = converter.GetDefaultDataConverter().FromPayload(p, &state)
		}
		// The commit's upsert: the continue-as-new follows in the same
		// workflow task, unless the execution stays open a while.
		w.committed = w.mine && (state == keel.StateCompleted || state == keel.StateFailed || state == keel.StateIdle)
		return false
	}
	switch ev.GetEventType() {
	case enumspb.EVENT_TYPE_TIMER_STARTED, enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
		// The commit's task ended without a continue-as-new.
		return w.committed
	}
	return false
}

// noWaitOutcome asks the session for the outcome of a committed run.
func (r *Run) noWaitOutcome(ctx context.Context) (keel.Outcome, bool, error) {
	var o keel.Outcome
	updateID := newID()
	err := r.s.c.resumeUpdate(ctx, r.s.id, updateID, &o, func() (client.WorkflowUpdateHandle, error) {
		return r.s.c.tc.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
			WorkflowID: r.s.id, UpdateID: updateID, UpdateName: api.UpdateOutcome,
			Args:         []any{api.OutcomeRequest{Run: r.Number, NoWait: true}},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		})
	})
	if err != nil {
		return o, false, nil
	}
	if o.TextCut {
		// The update answers a long final text cut (api.OutcomeRequest);
		// the terminal event in the log has all of it.
		return o, false, nil
	}
	return o, true, o.Err()
}

// askedOutcome asks the session for a run that has ended, with the
// outcome update without waiting, and reads the log otherwise.
func (r *Run) askedOutcome(ctx context.Context) (keel.Outcome, error) {
	st, err := r.s.State(ctx)
	if err != nil {
		return keel.Outcome{}, err
	}
	switch {
	case r.Number > st.Runs+st.Queued && st.Closed == nil:
		return keel.Outcome{}, &keel.Error{Code: keel.CodeNotFound, Message: "run " + r.ID + " not found"}
	case r.lostWith(st):
		if r.Number > st.Runs {
			return keel.Outcome{}, r.s.closedError(ctx)
		}
		return r.closedOutcome(st)
	case st.Closed == nil && st.Last != nil && st.Last.Number == r.Number:
		if o, ok, err := r.noWaitOutcome(ctx); ok {
			return o, err
		}
	}
	o, err := r.outcomeFromLog(ctx)
	if o.Status == "" && err != nil {
		// The log ended without the run's terminal event: the session
		// stopped running while the run was active.
		if st, serr := r.s.State(ctx); serr == nil && r.lostWith(st) {
			return r.closedOutcome(st)
		}
	}
	return o, err
}

// lostWith reports whether the session stopped running before it
// committed the run.
func (r *Run) lostWith(st api.SessionStatus) bool {
	return st.Closed != nil && (st.Last == nil || st.Last.Number < r.Number)
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

// State returns the run's state, from its session's state query.
func (r *Run) State(ctx context.Context) (api.RunStatus, error) {
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

// forRun names the run in a command sent to its session, so that the
// session refuses it once another run is active.
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
