package client

import (
	"context"
	"iter"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
)

// EventsAfter returns every durable event of the session after sequence
// after, committed or from the active run, as of now.
func (s *Session) EventsAfter(ctx context.Context, after int64) ([]keel.Envelope, error) {
	var out []keel.Envelope
	f := &follower{c: s.c, session: s.id, after: after}
	deliver := func(ev keel.Envelope) error {
		if ev.Seq > f.after {
			f.after = ev.Seq
			out = append(out, ev)
		}
		return nil
	}
	limit, err := s.c.committedNow(ctx, s.id)
	if err != nil {
		return out, err
	}
	active, err := f.readLog(ctx, s.id, limit, deliver)
	if err != nil {
		return out, err
	}
	if active != nil {
		if limit, err = s.c.committedNow(ctx, active.RunID); err != nil {
			return out, err
		}
		if _, err := f.readLog(ctx, active.RunID, limit, deliver); err != nil {
			return out, err
		}
	}
	return out, nil
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
	if st.ActiveRun == nil {
		return st.LastSeq, nil
	}
	var rs api.RunStatus
	if err := s.query(ctx, st.ActiveRun.RunID, api.QueryState, &rs); err != nil {
		return 0, err
	}
	return max(rs.LastSeq, st.LastSeq), nil
}
