package activities

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/instrument"
)

// DeliverEventsName is the activity that delivers a span of a session's
// durable log to one of the worker's event sinks (docs/contract.md §23.6).
const DeliverEventsName = "DeliverEvents"

// ErrSinkNotOffered is the application error type of DeliverEvents for a
// sink this worker does not have (or a worker that cannot read logs):
// not retried; the session stops delivering to it until its next
// execution.
const ErrSinkNotOffered = "SinkNotOffered"

// Bounds of one Deliver call: at most SinkBatchEvents events and about
// SinkBatchBytes of event JSON (at least one event), within
// SinkCallTimeout.
const (
	SinkBatchEvents = 256
	SinkBatchBytes  = 1 << 20
	SinkCallTimeout = time.Minute
)

// DeliverEventsInput names the events to deliver: those of session
// SessionID after After up to Upto, which the session had committed when
// it scheduled the activity. The events themselves are not in it: the
// activity reads them, so history never holds them twice.
type DeliverEventsInput struct {
	Sink      string `json:"sink"`
	SessionID string `json:"session_id"`
	After     int64  `json:"after"`
	Upto      int64  `json:"upto"`
}

// SessionLog reads sessions' durable logs, as a client does: the events
// query of the session's workflow (api.QueryEvents), and the segments of
// the content store its pages point to.
type SessionLog interface {
	EventsPage(ctx context.Context, sessionID string, q api.EventsQuery) (api.EventsPage, error)
	Segment(ctx context.Context, seg api.EventSegment) ([]keel.Envelope, error)
}

// DeliverEvents delivers the events (After, Upto] of a session to the
// sink, in order, in batches. It heartbeats the last sequence delivered,
// and a retried attempt resumes after it; a batch that failed is
// delivered again whole. Temporal retries a failed attempt; the session
// schedules the next span once this one is delivered.
func (a *Activities) DeliverEvents(ctx context.Context, in DeliverEventsInput) error {
	sink, ok := a.Sinks[in.Sink]
	if !ok || a.Logs == nil {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("sink %q is not offered by this worker", in.Sink), ErrSinkNotOffered, nil)
	}
	after := in.After
	if activity.HasHeartbeatDetails(ctx) {
		var done int64
		if err := activity.GetHeartbeatDetails(ctx, &done); err == nil && done > after {
			after = done
		}
	}
	var cursor atomic.Int64
	cursor.Store(after)
	// A live attempt is not timed out while a Deliver call or a read takes
	// its time, and an abandoned one (its session moved on) learns it from
	// a heartbeat's answer, which cancels ctx.
	ctx, hb := a.beginWith(ctx, func() any { return cursor.Load() })
	defer hb.Stop()
	h := activity.GetMetricsHandler(ctx)
	for after < in.Upto {
		evs, err := a.readLog(ctx, in, after)
		if err != nil {
			return err
		}
		for len(evs) > 0 {
			n := batchLen(evs)
			dctx, cancel := context.WithTimeout(ctx, SinkCallTimeout)
			err := sink.Deliver(dctx, in.SessionID, evs[:n])
			cancel()
			if err != nil {
				instrument.SinkFailed(h, in.Sink)
				return fmt.Errorf("sink %s: deliver events %d..%d of session %s: %w",
					in.Sink, evs[0].Seq, evs[n-1].Seq, in.SessionID, err)
			}
			instrument.SinkDelivered(h, in.Sink, evs[:n], time.Now())
			after = evs[n-1].Seq
			cursor.Store(after)
			if after < in.Upto {
				// Progress a retried attempt keeps (the last batch's
				// needs no heartbeat: the activity completes).
				activity.RecordHeartbeat(ctx, after)
			}
			evs = evs[n:]
		}
	}
	return nil
}

// readLog reads the next events of the span after the cursor: a page of
// the events query, pinned to in.Upto, or the segment it names; dense
// from after+1 and no further than in.Upto.
func (a *Activities) readLog(ctx context.Context, in DeliverEventsInput, after int64) ([]keel.Envelope, error) {
	page, err := a.Logs.EventsPage(ctx, in.SessionID, api.EventsQuery{After: after, Limit: SinkBatchEvents, Snapshot: in.Upto})
	if err != nil {
		return nil, fmt.Errorf("read events after %d of session %s: %w", after, in.SessionID, err)
	}
	evs := page.Events
	if page.Segment != nil {
		if evs, err = a.Logs.Segment(ctx, *page.Segment); err != nil {
			return nil, fmt.Errorf("read events %d..%d of session %s: %w", page.Segment.First, page.Segment.Last, in.SessionID, err)
		}
	}
	lo := 0
	for lo < len(evs) && evs[lo].Seq <= after {
		lo++
	}
	evs = evs[lo:]
	hi := 0
	for hi < len(evs) && evs[hi].Seq <= in.Upto {
		if evs[hi].Seq != after+int64(hi)+1 {
			return nil, fmt.Errorf("the log of session %s is not dense at %d", in.SessionID, after+int64(hi)+1)
		}
		hi++
	}
	if hi == 0 {
		return nil, fmt.Errorf("the log of session %s has no event %d", in.SessionID, after+1)
	}
	return evs[:hi], nil
}

// batchLen is how many of evs go in one Deliver call: at most
// SinkBatchEvents and about SinkBatchBytes, at least one.
func batchLen(evs []keel.Envelope) int {
	n, bytes := 0, 0
	for n < len(evs) && n < SinkBatchEvents {
		bytes += evs[n].Size()
		if n > 0 && bytes > SinkBatchBytes {
			break
		}
		n++
	}
	return n
}

// sinkNames are the worker's sinks, sorted (ModelTurnResult.Sinks),
// sorted once: Sinks does not change while the worker runs.
func (a *Activities) sinkNames() []string {
	a.sinkList.Do(func() {
		if len(a.Sinks) > 0 {
			a.sinkSorted = slices.Sorted(maps.Keys(a.Sinks))
		}
	})
	return a.sinkSorted
}
