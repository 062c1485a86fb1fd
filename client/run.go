package client

import (
	"context"
	"errors"
	"iter"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/live"
)

// Run is a handle on one run. Dropping it never cancels the run.
type Run struct {
	s *Session
	// ID is the run's ID, "<session>/run-<n>".
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

	// execution is the Temporal run ID of the session's execution running
	// it, when Send learned it.
	execution string

	early atomic.Pointer[earlySub]
}

// earlySub is a live subscription opened before the run started (Send) or
// before an action (Listen), so the run's next events stream misses none
// of the deltas after it. Unclaimed, it closes itself after earlyTTL.
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
// sequence goes on; any other error ends it. The first call on a run that
// Send returned takes over the live subscription Send opened; every other
// call subscribes when it starts, and its deltas start there.
func (r *Run) Events(ctx context.Context) iter.Seq2[keel.Envelope, error] {
	return func(yield func(keel.Envelope, error) bool) {
		base, err := r.base(ctx)
		if err != nil {
			yield(keel.Envelope{}, err)
			return
		}
		f := &follower{c: r.s.c, session: r.s.id, after: base, run: r.ID}
		for ev, err := range r.s.c.stream(ctx, f, r.early.Load().take()) {
			if !yield(ev, err) {
				return
			}
		}
	}
}

// EventsFrom follows the run's events after the session's sequence after
// (an api.HostRequest's or a state's LastSeq, say) as Events does, ending
// after the run's terminal event.
func (r *Run) EventsFrom(ctx context.Context, after int64) iter.Seq2[keel.Envelope, error] {
	f := &follower{c: r.s.c, session: r.s.id, after: after, run: r.ID}
	return r.s.c.stream(ctx, f, r.early.Load().take())
}

// Listen subscribes to the session's deltas now, for the run's next
// Events or EventsFrom stream to take: call it before an action whose
// deltas that stream must not miss, such as Respond (Send does it for the
// run it starts). Without a live channel it does nothing; a subscription
// no stream claims closes after 30 seconds.
func (r *Run) Listen(ctx context.Context) error {
	if r.s.c.live == nil {
		return nil
	}
	sub, err := r.s.c.live.Subscribe(ctx, r.s.id, live.SubscribeOptions{Buffer: r.s.c.liveBuf})
	if err != nil {
		return err
	}
	if old := r.early.Swap(newEarlySub(sub)); old != nil {
		if s := old.take(); s != nil {
			_ = s.Close()
		}
	}
	return nil
}

// Unlisten closes the subscription Listen (or Send) opened that no
// Events or EventsFrom stream has taken, when the action it was for
// failed and no stream will follow. It does nothing otherwise.
func (r *Run) Unlisten() {
	if s := r.early.Load().take(); s != nil {
		_ = s.Close()
	}
}

// base finds the sequence the run's events start after.
func (r *Run) base(ctx context.Context) (int64, error) {
	if r.BaseSeq >= 0 {
		return r.BaseSeq, nil
	}
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

// Cancel asks the run to stop. Cancellation is cooperative and idempotent:
// the run commits what it can, emits run.cancelled, and Outcome returns
// keel.ErrCancelled.
func (r *Run) Cancel(ctx context.Context) error {
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
	// The session cancels its active run only if it is this one; a run
	// that ended is not cancelled again (idempotent).
	return fromTemporal(r.s.c.tc.SignalWorkflow(ctx, r.s.id, "", api.SignalCancel,
		api.CancelRequest{RunID: r.ID}), "session "+r.s.id)
}
