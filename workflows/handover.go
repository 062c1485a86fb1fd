package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel/activities"
	"github.com/keelrun/keel/api"
)

// carry captures the session's state for the next execution.
func (s *session) carry() *api.SessionCarry {
	c := &api.SessionCarry{Revision: s.revision, Seq: s.seq, Runs: s.runs, Usage: s.usage, Last: s.last,
		State: s.state, Shutdown: s.shutdown, HandOvers: s.handOvers + 1, Transcript: s.transcript,
		Segments: s.segments, Tail: s.events, Marks: s.marks, Origin: s.origin, Delegations: s.delegations,
		Once: s.once}
	for _, p := range s.queue {
		c.Queue = append(c.Queue, p.req)
	}
	return c
}

// restore takes over the state a previous execution handed over.
func (s *session) restore(c *api.SessionCarry) {
	s.revision, s.seq, s.runs, s.usage, s.last = c.Revision, c.Seq, c.Runs, c.Usage, c.Last
	s.state, s.shutdown, s.handOvers = c.State, c.Shutdown, c.HandOvers
	s.transcript, s.segments, s.events = c.Transcript, c.Segments, c.Tail
	s.tailBase = s.seq - int64(len(s.events))
	s.marks, s.origin, s.delegations = c.Marks, c.Origin, c.Delegations
	s.once = c.Once
	// The previous execution learned whether keel is shut down.
	s.checked = true
	for i, req := range c.Queue {
		s.queue = append(s.queue, &pendingRun{number: s.runs + i + 1, req: req})
	}
}

// handOverDue reports whether this execution should continue as new: it
// committed a run and passed a limit, or Temporal suggests it.
func (s *session) handOverDue(ctx workflow.Context) bool {
	if s.runsHere == 0 {
		// A new execution always runs once first, so that a large carried
		// state cannot make executions hand over in a loop.
		return false
	}
	if s.movesInline(ctx) {
		return true
	}
	info := workflow.GetInfo(ctx)
	due := info.GetContinueAsNewSuggested() ||
		info.GetCurrentHistoryLength() >= s.limits.Events ||
		info.GetCurrentHistorySize() >= s.limits.Bytes ||
		s.tailBytesHere >= s.limits.TailBytes
	if !due {
		return false
	}
	// Sessions started before hand-overs existed replay their histories
	// without one here: GetVersion answers DefaultVersion when replaying a
	// history that has no marker for the change. Each check point has its
	// own change ID, so such a session still hands over at its first check
	// after the upgrade instead of never. Once an execution has a marker,
	// it is new code throughout and asks no more.
	if !s.handOverCode {
		s.handOverCode = workflow.GetVersion(ctx, fmt.Sprintf("hand-over-%d", s.runs), workflow.DefaultVersion, 1) == 1
	}
	return s.handOverCode
}

// movesInline reports whether a session of the two-workflow shape moves
// to the inline shape now, after a run: always in an execution that runs
// this code, never when replaying one that ran before it (GetVersion
// answers DefaultVersion for a history without the marker; each run has
// its own change ID, as hand-overs do).
func (s *session) movesInline(ctx workflow.Context) bool {
	if s.inline {
		return false
	}
	if !s.moveInline {
		s.moveInline = workflow.GetVersion(ctx, fmt.Sprintf("move-inline-%d", s.runs), workflow.DefaultVersion, 1) == 1
	}
	return s.moveInline
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

// flushEvents moves the events held in memory to the content store as one
// segment. Without a store (or while it fails) they stay in memory and
// travel in the carried state instead: nothing is dropped.
func (s *session) flushEvents(ctx workflow.Context) {
	if len(s.events) == 0 || s.noStore {
		return
	}
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2,
			MaximumAttempts: 3, NonRetryableErrorTypes: []string{activities.ErrNoStore}},
	})
	// A rewind may append its event while the segment is written: it
	// stays in memory, after the segment.
	held, last := s.events, s.seq
	var seg api.EventSegment
	if err := workflow.ExecuteLocalActivity(lctx, activities.StoreEventsName, held).Get(ctx, &seg); err != nil {
		workflow.GetLogger(ctx).Warn("durable events stay in the session's memory", "err", err)
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) && appErr.Type() == activities.ErrNoStore {
			s.noStore = true
		}
		return
	}
	if seg.First != s.tailBase+1 || seg.Last != last {
		workflow.GetLogger(ctx).Error("stored segment does not match the log", "first", seg.First, "last", seg.Last)
		return
	}
	s.segments = append(s.segments, seg)
	s.events = s.events[len(held):]
	if len(s.events) == 0 {
		s.events = nil
	}
	s.tailBase = last
}

// maxCarryBytes bounds what a session carries in its continue-as-new input
// when it has no content store to move values to: under Temporal's limit
// of 2 MB a payload, with room for the rest of the state.
const maxCarryBytes = 3 << 19

// carryFits reports whether the state to carry fits in a continue-as-new
// input. With a content store it always does: the codec moves the large
// parts there. Without one, a session whose log or transcript outgrew the
// input keeps running in this execution, as sessions did before hand-overs
// existed, until Temporal's own limits end it.
func (s *session) carryFits() bool {
	if !s.noStore {
		return true
	}
	n := 0
	for _, ev := range s.events {
		n += ev.Size()
	}
	for _, m := range s.transcript {
		n += len(m.Content) + envelopeOverhead
		for _, c := range m.ToolCalls {
			n += len(c.Arguments)
		}
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
		s.shutdown, s.queue = true, nil
	}
	// Nothing runs now, so a cancel has nothing to stop; run_state signals
	// come only from a running run.
	for workflow.GetSignalChannel(ctx, api.SignalCancel).ReceiveAsync(nil) {
	}
	workflow.GetLogger(ctx).Info("session continues as new", "runs", s.runs, "seq", s.seq,
		"segments", len(s.segments), "queued", len(s.queue))
	// The next execution starts on the deployment's current build (with
	// worker versioning; nothing changes without it).
	opts := workflow.ContinueAsNewErrorOptions{InitialVersioningBehavior: workflow.ContinueAsNewVersioningBehaviorAutoUpgrade}
	return workflow.NewContinueAsNewErrorWithOptions(ctx, opts, api.SessionWorkflowName,
		api.SessionInput{SessionID: s.id, Config: s.cfg, HandOver: s.limits, Carry: s.carry(), Inline: s.inline || s.moveInline})
}
