package workflows

import (
	"errors"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel/internal/delegation"
	"github.com/keelrun/keel/server/activities"
)

// Event sinks (docs/contract.md §23.6): the session delivers its durable
// events to each of the worker's sinks, at least once and in sequence
// order. Each sink has its own workflow goroutine and cursor (the last
// sequence it received, carried across continue-as-new): while the log
// is past the cursor and no delivery is in flight, it runs one
// DeliverEvents activity for the span after the cursor up to the last
// sequence emitted, which the workflow task that schedules the activity
// commits. The activity reads the events itself, so history holds them
// once. Nothing else waits for a delivery: the run goes on, and an
// execution that continues as new abandons the deliveries in flight; the
// next one starts again from the carried cursors, so a sink may get an
// event twice and dedupes by (session, seq).
//
// A child session ends its workflow after its one run, so it hands its
// cursors to its parent with its result (delegation.DelegationResult
// Undelivered), and the parent delivers the rest of the child's log.

// Delivery's timing. A delivery is retried by Temporal, 1 s, 2 s, 4 s, …
// at most sinkMaxBackoff apart, for sinkSchedule; then the session waits
// sinkPause and tries again from the same cursor: no event is skipped.
const (
	sinkAttempt    = 10 * time.Minute
	sinkHeartbeat  = 20 * time.Second
	sinkMaxBackoff = 30 * time.Second
	sinkSchedule   = 24 * time.Hour
	sinkPause      = time.Minute
)

// sinks is what the session knows of its event sinks in this execution.
type sinks struct {
	// on is set once the execution recorded sinks (its first Committed
	// marker names them); names are those recorded.
	on    bool
	names []string
}

// span is one delivery: a session's events after after, up to upto.
type span struct {
	sessionID   string
	after, upto int64
}

// startSinks starts a delivery goroutine for each sink the execution
// recorded in its first Committed marker (announce), on ctx, which a
// cancellation does not reach: a cancelled run's events are delivered
// too. An execution of code from before sinks recorded none.
func (s *session) startSinks(ctx workflow.Context, names []string) {
	if len(names) == 0 {
		return
	}
	s.sinks = sinks{on: true, names: names}
	for _, name := range names {
		workflow.Go(ctx, func(ctx workflow.Context) { s.deliver(ctx, name) })
	}
}

// deliver runs one sink's deliveries for the execution's life.
func (s *session) deliver(ctx workflow.Context, name string) {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		ScheduleToCloseTimeout: sinkSchedule,
		StartToCloseTimeout:    sinkAttempt,
		HeartbeatTimeout:       sinkHeartbeat,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2,
			MaximumInterval: sinkMaxBackoff, NonRetryableErrorTypes: []string{activities.ErrSinkNotOffered}},
		Summary: "sink " + name,
	})
	for {
		var next span
		var ok bool
		if err := workflow.Await(ctx, func() bool {
			next, ok = s.nextSpan(name)
			return ok && !s.ended
		}); err != nil {
			return
		}
		err := workflow.ExecuteActivity(actx, activities.DeliverEventsName, activities.DeliverEventsInput{
			Sink: name, SessionID: next.sessionID, After: next.after, Upto: next.upto}).Get(ctx, nil)
		if err == nil {
			s.delivered(name, next)
			continue
		}
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) && appErr.Type() == activities.ErrSinkNotOffered {
			// The cursor stays: the next execution records the sinks
			// again and, if it is offered then, goes on from there.
			workflow.GetLogger(ctx).Warn("event sink not offered by the worker: no deliveries to it in this execution",
				"sink", name)
			return
		}
		workflow.GetLogger(ctx).Warn("event sink failing; trying again", "sink", name, "after", next.after, "err", err)
		if workflow.Sleep(ctx, sinkPause) != nil {
			return
		}
	}
}

// nextSpan is what sink name should receive next: the session's own
// events after its cursor, else those of an ended child's log.
func (s *session) nextSpan(name string) (span, bool) {
	if last, at := s.lastSeq(), s.st.Sinks[name]; last > at {
		return span{sessionID: s.id, after: at, upto: last}, true
	}
	for _, l := range s.st.SinkLogs {
		if at := l.Sinks[name]; l.Seq > at {
			return span{sessionID: l.SessionID, after: at, upto: l.Seq}, true
		}
	}
	return span{}, false
}

// delivered moves sink name's cursor past a delivered span, and forgets
// a child's log once every sink of the execution has all of it.
func (s *session) delivered(name string, sp span) {
	if sp.sessionID == s.id {
		if s.st.Sinks == nil {
			s.st.Sinks = map[string]int64{}
		}
		s.st.Sinks[name] = max(s.st.Sinks[name], sp.upto)
		return
	}
	i := slices.IndexFunc(s.st.SinkLogs, func(l delegation.SinkLog) bool { return l.SessionID == sp.sessionID })
	if i < 0 {
		return
	}
	l := &s.st.SinkLogs[i]
	if l.Sinks == nil {
		l.Sinks = map[string]int64{}
	}
	l.Sinks[name] = max(l.Sinks[name], sp.upto)
	s.pruneSinkLogs()
}

// pruneSinkLogs forgets the children's logs that every sink of the
// execution has received whole. A sink added later gets a child's log
// only if its parent still holds it.
func (s *session) pruneSinkLogs() {
	s.st.SinkLogs = slices.DeleteFunc(s.st.SinkLogs, func(l delegation.SinkLog) bool {
		for _, n := range s.sinks.names {
			if l.Sinks[n] < l.Seq {
				return false
			}
		}
		return true
	})
	if len(s.st.SinkLogs) == 0 {
		s.st.SinkLogs = nil
	}
}

// adoptSinkLogs takes over the logs an ended child hands back, to
// deliver the rest of them.
func (s *session) adoptSinkLogs(logs []delegation.SinkLog) {
	if !s.sinks.on {
		return
	}
	for _, l := range logs {
		if l.Seq > 0 && !slices.ContainsFunc(s.st.SinkLogs, func(x delegation.SinkLog) bool { return x.SessionID == l.SessionID }) {
			s.st.SinkLogs = append(s.st.SinkLogs, l)
		}
	}
	s.pruneSinkLogs()
}

// sinkLogs are what a child session hands its parent as it ends: its own
// log with its cursors, and the logs of its children it had not finished
// delivering. Nil when the execution recorded no sinks.
func (s *session) sinkLogs() []delegation.SinkLog {
	if !s.sinks.on {
		return nil
	}
	var out []delegation.SinkLog
	if s.st.Seq > 0 {
		out = append(out, delegation.SinkLog{SessionID: s.id, Seq: s.st.Seq, Sinks: s.st.Sinks})
	}
	return append(out, s.st.SinkLogs...)
}
