package workflows

import (
	"unicode/utf8"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
)

// The outcome update (api.OutcomeRequest) answers run N's outcome once it
// is committed, as plain JSON any Temporal client reads. The session
// remembers the outcomes of its last api.OutcomesRemembered runs across
// continue-as-new; an older run's outcome is its terminal event in the
// log.

// rememberOutcome keeps o among the recent outcomes, forgetting the
// oldest past api.OutcomesRemembered.
func (s *session) rememberOutcome(o keel.Outcome) {
	s.st.Outcomes = append(s.st.Outcomes, plainOutcome(o))
	if n := len(s.st.Outcomes); n > api.OutcomesRemembered {
		s.st.Outcomes = append([]keel.Outcome(nil), s.st.Outcomes[n-api.OutcomesRemembered:]...)
	}
}

// recentOutcome returns run n's outcome if the session remembers it.
func (s *session) recentOutcome(n int) (keel.Outcome, bool) {
	for _, o := range s.st.Outcomes {
		if o.Number == n {
			return o, true
		}
	}
	return keel.Outcome{}, false
}

// committed reports whether run n is committed.
func (s *session) committed(n int) bool { return s.st.Last != nil && s.st.Last.Number >= n }

// validateOutcome refuses, before it enters history, an outcome update for
// a run the session never accepted, or one it cannot answer.
func (s *session) validateOutcome(req api.OutcomeRequest) error {
	if req.Run < 1 || req.Run > s.st.Runs+len(s.queue)+s.admitting {
		return wireError(keel.Errorf(keel.CodeNotFound, "run %s not found", keel.RunID(s.id, req.Run)))
	}
	if s.committed(req.Run) {
		if _, ok := s.recentOutcome(req.Run); !ok {
			return s.forgotten(req.Run)
		}
		return nil
	}
	if req.NoWait {
		return wireError(keel.Errorf(keel.CodeRunActive, "run %s has not ended", keel.RunID(s.id, req.Run)))
	}
	if s.waiters >= api.MaxOutcomeWaiters {
		// Temporal refuses updates beyond its in-flight limit with an
		// error of its own; keel refuses first, with room left for sends
		// and commands.
		return wireError(keel.Errorf(keel.CodeTooMany,
			"session %s already has %d outcome updates waiting (the most it lets wait); ask with no_wait or follow the session's log",
			s.id, api.MaxOutcomeWaiters))
	}
	return nil
}

// forgotten is the answer for a committed run older than those the
// session remembers.
func (s *session) forgotten(n int) error {
	return wireError(keel.Errorf(keel.CodeNotFound,
		"run %s is older than the last %d runs whose outcomes session %s keeps; its terminal event is in the session's log",
		keel.RunID(s.id, n), api.OutcomesRemembered, s.id))
}

// outcome waits for run req.Run to be committed and answers its outcome.
// While waiting for a run that a later execution will run, the answer is
// api.ErrTypeMoved: ask again.
func (s *session) outcome(ctx workflow.Context, req api.OutcomeRequest) (keel.Outcome, error) {
	if !s.committed(req.Run) {
		s.waiters++
		defer func() { s.waiters-- }()
	}
	// A Temporal cancellation of the execution cancels the run, not the
	// wait for its outcome.
	ctx, _ = workflow.NewDisconnectedContext(ctx)
	if err := workflow.Await(ctx, func() bool { return s.committed(req.Run) || s.movingOn }); err != nil {
		return keel.Outcome{}, err
	}
	if !s.committed(req.Run) {
		return keel.Outcome{}, temporal.NewApplicationErrorWithOptions("session "+s.id+" continues as new; ask again",
			api.ErrTypeMoved, temporal.ApplicationErrorOptions{NonRetryable: true})
	}
	if o, ok := s.recentOutcome(req.Run); ok {
		return o, nil
	}
	return keel.Outcome{}, s.forgotten(req.Run)
}

// plainOutcome is o as the outcome update answers it: a final text longer
// than api.MaxOutcomeText is cut, at a character boundary, and flagged, so
// that the answer is small enough to stay plain JSON (api.OutcomeRequest).
//
// A structured answer (keel.Outcome.Answer) counts with the text: when the
// two pass the limit together the answer is left out and TextCut set, so
// a reader takes both from the terminal event.
func plainOutcome(o keel.Outcome) keel.Outcome {
	if len(o.Text)+len(o.Answer) <= api.MaxOutcomeText {
		return o
	}
	o.Answer, o.TextCut = nil, true
	if len(o.Text) <= api.MaxOutcomeText {
		return o
	}
	n := api.MaxOutcomeText
	for n > 0 && !utf8.RuneStart(o.Text[n]) {
		n--
	}
	o.Text = o.Text[:n]
	return o
}
