// Package sessionlog reads a session's durable log into a transcript, with
// the time of each run's first and last durable event: what compare,
// rerun and evals read of a session.
package sessionlog

import (
	"context"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/transcript"
)

// page is how many events one read of the log asks for.
const page = 5_000

// Span is the time of a run's first and last durable event.
type Span struct{ First, Last time.Time }

// Add widens the span to an event's time; a zero time is ignored.
func (s *Span) Add(at time.Time) {
	if at.IsZero() {
		return
	}
	if s.First.IsZero() {
		s.First = at
	}
	s.Last = at
}

// Read reads the session's durable log from its start. A log of more
// than limit events is refused (keel.CodeTooLarge).
func Read(ctx context.Context, s *client.Session, limit int) (*transcript.Transcript, map[string]Span, error) {
	t := transcript.New()
	spans := map[string]Span{}
	var after int64
	for read := 0; ; {
		evs, more, err := s.EventsPage(ctx, after, page)
		if err != nil {
			return nil, nil, err
		}
		if read += len(evs); read > limit {
			return nil, nil, keel.Errorf(keel.CodeTooLarge, "session %s has more than %d events, more than this reads", s.ID(), limit)
		}
		for _, env := range evs {
			t.Apply(env)
			if env.RunID != "" {
				sp := spans[env.RunID]
				sp.Add(env.At)
				spans[env.RunID] = sp
			}
			after = max(after, env.Seq)
		}
		if !more || len(evs) == 0 {
			return t, spans, nil
		}
	}
}
