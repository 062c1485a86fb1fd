package transcript_test

import (
	"testing"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/transcript"
)

// TestSessionEvents: session.forked and session.rewound name no run; the
// view keeps them as the session's (docs/contract.md §19) and makes no run
// of them, and a repeat of one is dropped like any durable event.
func TestSessionEvents(t *testing.T) {
	s := newStream(t)
	s.run = ""
	forked := keel.SessionForked{Source: "src", Run: 2, Revision: 2, Seq: 9, Messages: 4}
	rewound := keel.SessionRewound{FromRun: 1, FromRevision: 3, ToRun: 0, Revision: 4}
	s.durable(forked)
	s.run = "s/run-1"
	s.durable(started()...)
	s.durable(keel.RunCompleted{Revision: 3, Text: "t", Steps: 1})
	s.run = ""
	s.durable(rewound)
	s.out = append(s.out, s.out[len(s.out)-1])
	tr := transcript.New()
	var kinds []transcript.Kind
	for _, env := range s.out {
		ch := tr.Apply(env)
		kinds = append(kinds, ch.Kind)
		if ch.Kind == transcript.KindSession && ch.Run != nil {
			t.Errorf("%s applied to a run", env.Type)
		}
	}
	view := tr.View()
	want(t, "kinds", kinds, []transcript.Kind{transcript.KindSession, transcript.KindRun, transcript.KindStep,
		transcript.KindEnd, transcript.KindSession, transcript.KindSession})
	want(t, "runs", len(view.Runs), 1)
	want(t, "forked", *view.Forked, forked)
	want(t, "rewinds", view.Rewinds, []keel.SessionRewound{rewound})
	want(t, "repeats", view.Ignored[transcript.ReasonRepeat], 1)
}
