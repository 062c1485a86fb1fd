package workflows

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
)

// pageEvents answers an events query over a dense log holding sequences
// base+1 .. last. It implements the three cursor forms: no snapshot
// captures the current high-watermark; a snapshot pins the page to it, so
// paging neither skips nor repeats while the log grows.
func pageEvents(log []keel.Envelope, base, last int64, q api.EventsQuery) (api.EventsPage, error) {
	snap, err := snapshotOf(q, last)
	if err != nil {
		return api.EventsPage{}, err
	}
	limit := q.Limit
	if limit <= 0 || limit > api.DefaultEventsLimit {
		limit = api.DefaultEventsLimit
	}
	from := q.After
	if from < base {
		from = base
	}
	page := api.EventsPage{Snapshot: snap, Events: []keel.Envelope{}}
	if from >= snap {
		return page, nil
	}
	lo := int(from - base)
	hi := int(snap - base)
	if hi > len(log) || log[lo].Seq != from+1 {
		return api.EventsPage{}, fmt.Errorf("event log is not dense at %d", from+1)
	}
	bytes := 0
	for i := lo; i < hi; i++ {
		bytes += log[i].Size()
		if i-lo == limit || (i > lo && bytes > api.MaxPageBytes) {
			hi = i
			page.More = true
			break
		}
	}
	page.Events = log[lo:hi]
	return page, nil
}

// snapshotOf checks a query's cursor and returns the high-watermark its
// page is read at.
func snapshotOf(q api.EventsQuery, last int64) (int64, error) {
	if q.After < 0 {
		return 0, keel.Errorf(keel.CodeInvalidInput, "events after %d: the cursor cannot be negative", q.After)
	}
	if q.Snapshot > 0 {
		if q.Snapshot > last {
			return 0, keel.Errorf(keel.CodeInvalidInput,
				"snapshot %d is ahead of the log, which ends at %d", q.Snapshot, last)
		}
		return q.Snapshot, nil
	}
	return last, nil
}

// pageEvents answers the session's events query: from memory for the
// tail, or with the segment of the content store that holds the events
// after the cursor.
func (s *session) pageEvents(q api.EventsQuery) (api.EventsPage, error) {
	if q.After >= s.tailBase() || len(s.st.Segments) == 0 {
		tail := s.st.Tail
		if s.run != nil {
			// The active run's events follow the tail in the same log.
			tail = append(tail[:len(tail):len(tail)], s.run.journal.events...)
		}
		return pageEvents(tail, s.tailBase(), s.lastSeq(), q)
	}
	snap, err := snapshotOf(q, s.lastSeq())
	if err != nil {
		return api.EventsPage{}, err
	}
	segs := s.st.Segments
	i := sort.Search(len(segs), func(i int) bool { return segs[i].Last > q.After })
	if i == len(segs) {
		return api.EventsPage{}, fmt.Errorf("no segment holds event %d", q.After+1)
	}
	seg := segs[i]
	return api.EventsPage{Events: []keel.Envelope{}, Snapshot: snap, Segment: &seg, More: seg.Last < snap}, nil
}

// pageHistory answers a history query.
func pageHistory(msgs []keel.Message, rev int64, q api.HistoryQuery) api.HistoryPage {
	limit := q.Limit
	if limit <= 0 {
		limit = api.DefaultHistoryLimit
	}
	off := q.Offset
	if off < 0 {
		off = 0
	}
	if off > len(msgs) {
		off = len(msgs)
	}
	end := off
	for bytes := 0; end < len(msgs) && end-off < limit; end++ {
		b, _ := json.Marshal(msgs[end])
		if bytes += len(b); end > off && bytes > api.MaxPageBytes {
			break
		}
	}
	return api.HistoryPage{Messages: msgs[off:end], Offset: off, Total: len(msgs), Revision: rev}
}
