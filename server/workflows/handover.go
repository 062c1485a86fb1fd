package workflows

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/carry"
	"github.com/keelrun/keel/server/activities"
)

// restore takes over the state the previous execution handed over.
func (s *session) restore(c *carry.SessionCarry) {
	s.st = *c
	s.st.Queue = nil
	// The previous execution learned whether keel is shut down, or left
	// it to a model turn (lean.go).
	s.checked = true
	for i, req := range c.Queue {
		s.queue = append(s.queue, &pendingRun{number: s.st.Runs + i + 1, req: req})
	}
}

// moveOn ends this execution after its run: every handler finishes (an
// outcome update waiting for a later run is told to ask again), the
// events move to the content store when the tail grew past its limit,
// and the session continues as new. It returns nil without moving on
// when a prompt is waiting for its run to start: that run goes first.
func (s *session) moveOn(ctx workflow.Context) error {
	s.movingOn = true
	if !s.quiet(ctx) {
		s.movingOn = false
		return nil
	}
	if s.tailBytes() >= s.limits.TailBytes {
		s.flushEvents(ctx)
	}
	if !s.carryFits() {
		// Without a content store the state outgrew a continue-as-new
		// input: this execution keeps the session until Temporal's own
		// limits end it.
		workflow.GetLogger(ctx).Warn("session state too large to continue as new without a content store")
		s.movingOn = false
		s.ran = false
		return nil
	}
	return s.handOver(ctx)
}

// quiet waits until every update and signal handler has finished, so none
// is cut off by the hand-over. It reports false when a prompt is waiting
// for its run to start: that run goes first, and the hand-over waits for
// the next quiet point.
func (s *session) quiet(ctx workflow.Context) bool {
	waiting := func() bool { return len(s.queue) > 0 && s.queue[0].waiting }
	if err := workflow.Await(ctx, func() bool { return waiting() || workflow.AllHandlersFinished(ctx) }); err != nil {
		return false
	}
	return !waiting()
}

// tailBytes is the size of the events the session holds in memory.
func (s *session) tailBytes() int {
	n := 0
	for _, ev := range s.st.Tail {
		n += ev.Size()
	}
	return n
}

// flushEvents moves the events held in memory to the content store as one
// segment. Without a store (or while it fails) they stay in memory and
// travel in the carried state instead: nothing is dropped.
func (s *session) flushEvents(ctx workflow.Context) {
	if len(s.st.Tail) == 0 || s.noStore {
		return
	}
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2,
			MaximumAttempts: 3, NonRetryableErrorTypes: []string{activities.ErrNoStore}},
	})
	// A rewind may append its event while the segment is written: it
	// stays in memory, after the segment.
	held, base, last := s.st.Tail, s.tailBase(), s.st.Seq
	var seg api.EventSegment
	if err := workflow.ExecuteLocalActivity(lctx, activities.StoreEventsName, held).Get(ctx, &seg); err != nil {
		workflow.GetLogger(ctx).Warn("durable events stay in the session's memory", "err", err)
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) && appErr.Type() == activities.ErrNoStore {
			s.noStore = true
		}
		return
	}
	if seg.First != base+1 || seg.Last != last {
		workflow.GetLogger(ctx).Error("stored segment does not match the log", "first", seg.First, "last", seg.Last)
		return
	}
	s.st.Segments = append(s.st.Segments, seg)
	s.st.Tail = s.st.Tail[len(held):]
	if len(s.st.Tail) == 0 {
		s.st.Tail = nil
	}
}

// maxCarryBytes bounds what a session carries in its continue-as-new input
// when it has no content store to move values to: under Temporal's limit
// of 2 MB a payload, with room for the rest of the state.
const maxCarryBytes = 3 << 19

// carryFits reports whether the state to carry fits in a continue-as-new
// input. With a content store it always does: the codec moves the large
// parts there. Without one, a session whose log or transcript outgrew the
// input keeps running in this execution until Temporal's own limits end
// it.
func (s *session) carryFits() bool {
	if !s.noStore {
		return true
	}
	n := s.tailBytes()
	for _, m := range s.st.Transcript {
		n += len(m.Content) + envelopeOverhead
		for _, c := range m.ToolCalls {
			n += len(c.Arguments)
		}
	}
	for _, o := range s.st.Outcomes {
		n += len(o.Text) + len(o.Answer) + envelopeOverhead
	}
	return n <= maxCarryBytes
}

// envelopeOverhead bounds the JSON of a message's or event's fixed fields.
const envelopeOverhead = 160

// handOver ends this execution and continues the session as new with its
// carried state. Signals delivered but not yet handled are taken first:
// a shutdown must not be lost with this execution.
func (s *session) handOver(ctx workflow.Context) error {
	// The next execution trusts what this one learned of the runtime.
	_ = workflow.Await(ctx, func() bool { return s.checked })
	for workflow.GetSignalChannel(ctx, api.SignalShutdown).ReceiveAsync(nil) {
		s.st.Shutdown, s.queue = true, nil
	}
	// Nothing runs now, so a cancel has nothing to stop.
	for workflow.GetSignalChannel(ctx, api.SignalCancel).ReceiveAsync(nil) {
	}
	workflow.GetLogger(ctx).Info("session continues as new", "runs", s.st.Runs, "seq", s.st.Seq,
		"segments", len(s.st.Segments), "queued", len(s.queue))
	c := s.st
	c.HandOvers++
	for _, p := range s.queue {
		c.Queue = append(c.Queue, p.req)
	}
	// The next execution starts on the deployment's current build (with
	// worker versioning; nothing changes without it).
	opts := workflow.ContinueAsNewErrorOptions{InitialVersioningBehavior: workflow.ContinueAsNewVersioningBehaviorAutoUpgrade}
	return workflow.NewContinueAsNewErrorWithOptions(ctx, opts, api.SessionWorkflowName,
		carry.SessionInput{SessionID: s.id, Config: s.cfg, HandOver: s.limits, Carry: &c, Shape: s.shape})
}
