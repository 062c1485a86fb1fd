package workflows

import (
	"fmt"

	"github.com/keelrun/keel"
)

// pageEvents answers an events query over a dense log holding sequences
// base+1 .. last. It implements the three cursor forms: no snapshot
// captures the current high-watermark; a snapshot pins the page to it, so
// paging neither skips nor repeats while the log grows.
func pageEvents(log []keel.Envelope, base, last int64, q EventsQuery) (EventsPage, error) {
	if q.After < 0 {
		return EventsPage{}, keel.Errorf(keel.CodeInvalidInput, "events after %d: the cursor cannot be negative", q.After)
	}
	snap := last
	if q.Snapshot > 0 {
		if q.Snapshot > last {
			return EventsPage{}, keel.Errorf(keel.CodeInvalidInput,
				"snapshot %d is ahead of the log, which ends at %d", q.Snapshot, last)
		}
		snap = q.Snapshot
	}
	limit := q.Limit
	if limit <= 0 || limit > DefaultEventsLimit {
		limit = DefaultEventsLimit
	}
	from := q.After
	if from < base {
		from = base
	}
	page := EventsPage{Snapshot: snap, Events: []keel.Envelope{}}
	if from >= snap {
		return page, nil
	}
	lo := int(from - base)
	hi := int(snap - base)
	if hi-lo > limit {
		hi = lo + limit
		page.More = true
	}
	if hi > len(log) || log[lo].Seq != from+1 {
		return EventsPage{}, fmt.Errorf("event log is not dense at %d", from+1)
	}
	page.Events = log[lo:hi]
	return page, nil
}

// pageHistory answers a history query.
func pageHistory(msgs []keel.Message, rev int64, q HistoryQuery) HistoryPage {
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultHistoryLimit
	}
	off := q.Offset
	if off < 0 {
		off = 0
	}
	if off > len(msgs) {
		off = len(msgs)
	}
	end := off + limit
	if end > len(msgs) {
		end = len(msgs)
	}
	return HistoryPage{Messages: msgs[off:end], Offset: off, Total: len(msgs), Revision: rev}
}
