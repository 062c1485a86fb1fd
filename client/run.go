package client

import (
	"context"
	"errors"
	"iter"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/live"
)

// Run is a handle on one run. Dropping it never cancels the run.
type Run struct {
	s *Session
	// ID is the run's ID, "<session>/run-<n>"; in a session begun before
	// inline sessions, also its Run workflow's ID.
	ID     string
	Number int
	// Revision is the session revision the run started from.
	Revision int64
	// BaseSeq is the last durable sequence before the run's first event;
	// -1 when unknown (a handle made with Session.Run).
	BaseSeq int64
	// Queued says the run waits behind another one.
	Queued bool
	// SteeringID is set when Send (with OrSteer) delivered the prompt to
	// this already active run as steering.
	SteeringID string
	// Repeated says SendOnce met an ID the session took before: this is
	// the run that send started (or queued) then, and nothing started now.
	Repeated bool

	// shape says where the run executes (inline.go); execution is the
	// Temporal run ID of the session's execution running it, when Send
	// learned it.
	shape     runShape
	execution string

	early *earlySub
}

// earlySub is a live subscription Send opened before the run started, so
// the first Events stream of the run misses none of its deltas. Unclaimed,
// it closes itself after earlyTTL.
type earlySub struct {
	mu  sync.Mutex
	sub live.Subscription
}

const earlyTTL = 30 * time.Second

func newEarlySub(sub live.Subscription) *earlySub {
	e := &earlySub{sub: sub}
	time.AfterFunc(earlyTTL, func() {
		if s := e.take(); s != nil {
			_ = s.Close()
		}
	})
	return e
}

// take hands the subscription to its one user.
func (e *earlySub) take() live.Subscription {
	if e == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.sub
	e.sub = nil
	return s
}

// Session returns the run's session.
func (r *Run) Session() *Session { return r.s }

// Events follows the run from its first event: durable events from the
// log (each exactly once, in order) and, with a live channel, its deltas
// ordered among them. The sequence ends after the run's terminal event.
// A *live.LaggedError element reports deltas lost to a slow reader and the
// sequence goes on; any other error ends it.
func (r *Run) Events(ctx context.Context) iter.Seq2[keel.Envelope, error] {
	return func(yield func(keel.Envelope, error) bool) {
		base, err := r.base(ctx)
		if err != nil {
			yield(keel.Envelope{}, err)
			return
		}
		f := &follower{c: r.s.c, session: r.s.id, after: base, run: r.ID}
		for ev, err := range r.s.c.stream(ctx, f, r.early.take()) {
			if !yield(ev, err) {
				return
			}
		}
	}
}

// base finds the sequence the run's events start after.
func (r *Run) base(ctx context.Context) (int64, error) {
	if r.BaseSeq >= 0 {
		return r.BaseSeq, nil
	}
	if inline, err := r.inline(ctx); err != nil || inline {
		if err != nil {
			return 0, err
		}
		return r.inlineBase(ctx)
	}
	// Read the session first: if the run has not started yet, its events
	// come after everything the session holds now.
	st, err := r.s.State(ctx)
	if err != nil {
		return 0, err
	}
	var page api.EventsPage
	err = r.s.query(ctx, r.ID, api.QueryEvents, &page, api.EventsQuery{Limit: 1})
	switch {
	case err == nil && len(page.Events) > 0:
		return page.Events[0].Seq - 1, nil
	case errors.Is(err, keel.ErrNotFound) && st.Runs >= r.Number:
		// The session started the run, but its workflow is gone (past the
		// namespace's retention): its events are in the session's log,
		// somewhere after the start.
		return 0, nil
	case err == nil || errors.Is(err, keel.ErrNotFound):
		return st.LastSeq, nil
	}
	return 0, err
}

// Outcome waits for the run to end and for its session to commit it, and
// returns its outcome: after it returns, the session's state, history and
// log include the run. The error is nil for a completed run,
// keel.ErrCancelled for a cancelled one and the typed failure otherwise
// (match with errors.Is / errors.As). It works from any process at any time
// after the run started.
func (r *Run) Outcome(ctx context.Context) (keel.Outcome, error) {
	if inline, err := r.inline(ctx); err != nil || inline {
		if err != nil {
			return keel.Outcome{}, err
		}
		return r.inlineOutcome(ctx)
	}
	var res api.RunResult
	err := r.s.c.tc.GetWorkflow(ctx, r.ID, "").Get(ctx, &res)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		// A queued run has no workflow until its turn comes, and a run
		// just sent may not have one yet (Send returns at the start
		// request).
		if err := r.waitStarted(ctx); err != nil {
			return keel.Outcome{}, err
		}
		if _, err := r.awaitWorkflow(ctx); err != nil {
			return keel.Outcome{}, err
		}
		err = r.s.c.tc.GetWorkflow(ctx, r.ID, "").Get(ctx, &res)
		if errors.As(err, &nf) {
			// Started, and its workflow is gone already (retention): the
			// session's log keeps its terminal event.
			return r.outcomeFromLog(ctx)
		}
	}
	if err == nil {
		if n := len(res.Events); n > 0 {
			if err := r.s.waitCommitted(ctx, res.Events[n-1].Seq); err != nil {
				return res.Outcome, err
			}
		}
		return res.Outcome, res.Outcome.Err()
	}
	var terminated *temporal.TerminatedError
	var appErr *temporal.ApplicationError
	if errors.As(err, &terminated) || errors.As(err, &appErr) || errors.As(err, new(*temporal.CanceledError)) {
		// The Run workflow ended without an outcome; the session records
		// the run's failure. Its terminal event says what happened.
		return r.outcomeFromLog(ctx)
	}
	return keel.Outcome{}, fromTemporal(err, "run "+r.ID)
}

// waitStarted waits until the session has started the run (its Run
// workflow exists), or reports that it never will.
func (r *Run) waitStarted(ctx context.Context) error {
	w := r.s.c.watch(r.s.id)
	if err := w.catchUp(ctx); err != nil {
		return err
	}
	for {
		st, err := r.s.State(ctx)
		if err != nil {
			return err
		}
		switch {
		case st.Runs >= r.Number:
			return nil
		case st.Closed != nil:
			return r.s.closedError(ctx)
		case st.Queued == 0 && st.ActiveRun == nil:
			return &keel.Error{Code: keel.CodeNotFound, Message: "run " + r.ID + " not found"}
		}
		if _, err := w.wait(ctx); err != nil {
			return err
		}
	}
}

// outcomeFromLog reads a run's outcome from its terminal event in the
// session's log, waiting for the session to record it.
func (r *Run) outcomeFromLog(ctx context.Context) (keel.Outcome, error) {
	var steps int
	var total keel.Usage
	for ev, err := range r.Events(ctx) {
		if err != nil {
			var keelErr *keel.Error
			if errors.As(err, &keelErr) || ctx.Err() != nil {
				return keel.Outcome{}, err
			}
			continue
		}
		if !ev.Terminal() {
			// What the terminal event does not say: the steps taken and
			// the usage of every request, abandoned attempts included.
			switch ev.Type {
			case keel.TypeStepStarted:
				steps++
			case keel.TypeUsageUpdated:
				if e, err := ev.Event(); err == nil {
					total = e.(keel.UsageUpdated).Total
				}
			}
			continue
		}
		o := keel.Outcome{RunID: r.ID, Number: r.Number, Steps: steps, UsageTotal: total, Seq: ev.Seq}
		e, err := ev.Event()
		if err != nil {
			return o, err
		}
		switch t := e.(type) {
		case keel.RunFailed:
			o.Status, o.Revision = keel.StatusFailed, t.Revision
			o.Error = &keel.Error{Code: t.Code, Message: t.Message, Retryable: t.Retryable}
		case keel.RunCancelled:
			o.Status, o.Revision = keel.StatusCancelled, t.Revision
		case keel.RunCompleted:
			o.Status, o.Revision, o.Text, o.Usage, o.Steps = keel.StatusCompleted, t.Revision, t.Text, t.Usage, t.Steps
			o.Answer = t.Answer
		}
		return o, o.Err()
	}
	return keel.Outcome{}, &keel.Error{Code: keel.CodeInternal, Message: "run " + r.ID + " ended without a terminal event"}
}

// State returns the run's state.
func (r *Run) State(ctx context.Context) (api.RunStatus, error) {
	if inline, err := r.inline(ctx); err != nil || inline {
		if err != nil {
			return api.RunStatus{}, err
		}
		return r.inlineState(ctx)
	}
	var st api.RunStatus
	return st, r.whenStarted(ctx, func() error { return r.s.query(ctx, r.ID, api.QueryState, &st) })
}

// whenStarted calls op, which addresses the run's workflow. Send returns
// as soon as the session asked Temporal to start that workflow, so it may
// not exist yet: when op finds no workflow while the session holds the
// run as started but not ended, whenStarted waits for the workflow to
// appear and calls op again.
func (r *Run) whenStarted(ctx context.Context, op func() error) error {
	for {
		err := op()
		var nf *serviceerror.NotFound
		if !errors.Is(err, keel.ErrNotFound) && !errors.As(err, &nf) {
			return err
		}
		starting, werr := r.awaitWorkflow(ctx)
		if werr != nil {
			return werr
		}
		if !starting {
			return err
		}
	}
}

// awaitWorkflow waits, following the session's history, while the run is
// started in its session but its workflow does not exist yet. It reports
// whether the workflow is running now, so op is worth another try; false
// means op's answer stands: the workflow has closed, or the run is not
// about to start (queued, ended, or never started).
func (r *Run) awaitWorkflow(ctx context.Context) (bool, error) {
	w := r.s.c.watch(r.s.id)
	if err := w.catchUp(ctx); err != nil {
		return false, err
	}
	for {
		desc, err := r.s.c.tc.DescribeWorkflowExecution(ctx, r.ID, "")
		if err == nil {
			return desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, nil
		}
		if err := fromTemporal(err, "run "+r.ID); !errors.Is(err, keel.ErrNotFound) {
			return false, err
		}
		st, err := r.s.State(ctx)
		if err != nil {
			return false, err
		}
		starting := st.Closed == nil && st.Runs >= r.Number && (st.Last == nil || st.Last.Number < r.Number)
		if !starting {
			return false, nil
		}
		if _, err := w.wait(ctx); err != nil {
			return false, err
		}
	}
}

// Cancel asks the run to stop. Cancellation is cooperative and idempotent:
// the run commits what it can, emits run.cancelled, and Outcome returns
// keel.ErrCancelled.
func (r *Run) Cancel(ctx context.Context) error {
	if inline, err := r.inline(ctx); err != nil || inline {
		if err != nil {
			return err
		}
		st, err := r.s.State(ctx)
		if err != nil {
			return err
		}
		switch {
		case r.Number > st.Runs+st.Queued:
			return &keel.Error{Code: keel.CodeNotFound, Message: "run " + r.ID + " not found"}
		case r.Number > st.Runs:
			return &keel.Error{Code: keel.CodeNotAccepting, Message: "run " + r.ID + " is queued and has not started; nothing to cancel"}
		}
		// The session cancels its active run only if it is this one; a
		// run that ended is not cancelled again (idempotent).
		return fromTemporal(r.s.c.tc.SignalWorkflow(ctx, r.s.id, "", api.SignalCancel,
			api.CancelRequest{RunID: r.ID}), "session "+r.s.id)
	}
	err := r.whenStarted(ctx, func() error {
		return fromTemporal(r.s.c.tc.SignalWorkflow(ctx, r.ID, "", api.SignalCancel, nil), "run "+r.ID)
	})
	if errors.Is(err, keel.ErrNotFound) {
		// Cancelling a run that already ended changes nothing; only a run
		// that never existed is an error.
		if _, derr := r.s.c.tc.DescribeWorkflowExecution(ctx, r.ID, ""); derr == nil {
			return nil
		}
	}
	return err
}
