package client

import (
	"context"
	"iter"

	"github.com/keelrun/keel"
)

// EventsAfter returns every durable event of the session after sequence
// after, committed or from the active run, as of now.
func (s *Session) EventsAfter(ctx context.Context, after int64) ([]keel.Envelope, error) {
	out, _, err := s.EventsPage(ctx, after, 0)
	return out, err
}

// EventsPage is EventsAfter returning at most limit events (all of them
// when limit <= 0); more reports that events after the page were there.
// It stops reading the log once the page is full, so a reader can page
// through a long session from any sequence.
func (s *Session) EventsPage(ctx context.Context, after int64, limit int) (page []keel.Envelope, more bool, err error) {
	f := &follower{c: s.c, session: s.id, after: after}
	deliver := func(ev keel.Envelope) error {
		if ev.Seq <= f.after {
			return nil
		}
		if limit > 0 && len(page) == limit {
			more = true
			return errStop
		}
		f.after = ev.Seq
		page = append(page, ev)
		return nil
	}
	sw := s.c.watch(s.id)
	for {
		read, err := f.readLog(ctx, sw, deliver)
		if read || err != nil {
			return page, more, stopped(err)
		}
		// The answer came from state no task has committed yet: read
		// again once the session's next task ended.
		if _, err := sw.wait(ctx); err != nil {
			return page, more, err
		}
	}
}

// EventsFrom replays the session's durable events after sequence after and
// then follows it live, across runs, never skipping or repeating a durable
// event. With a live channel, deltas are merged in order. A reader that
// lagged or reconnected resumes with EventsFrom(last sequence it saw).
func (s *Session) EventsFrom(ctx context.Context, after int64) iter.Seq2[keel.Envelope, error] {
	return s.c.stream(ctx, &follower{c: s.c, session: s.id, after: after}, nil)
}

// Events follows the session live from now.
func (s *Session) Events(ctx context.Context) iter.Seq2[keel.Envelope, error] {
	return func(yield func(keel.Envelope, error) bool) {
		last, err := s.lastSeq(ctx)
		if err != nil {
			yield(keel.Envelope{}, err)
			return
		}
		for ev, err := range s.EventsFrom(ctx, last) {
			if !yield(ev, err) {
				return
			}
		}
	}
}

// lastSeq returns the session's latest durable sequence, counting the
// active run's events.
func (s *Session) lastSeq(ctx context.Context) (int64, error) {
	st, err := s.State(ctx)
	if err != nil {
		return 0, err
	}
	if st.Run != nil {
		return max(st.Run.LastSeq, st.LastSeq), nil
	}
	return st.LastSeq, nil
}
