package keel

// The session's own events: facts about the session's conversation that
// belong to no run (docs/contract.md §1.3, §19). Their envelopes have no
// run_id.

// Wire names of the session's events.
const (
	TypeSessionForked  = "session.forked"
	TypeSessionRewound = "session.rewound"
)

func init() {
	register[SessionForked](TypeSessionForked)
	register[SessionRewound](TypeSessionRewound)
}

// SessionForked is the first event of a session made by a fork: the
// session it was forked from, the point (after run Run, or after step Step
// of run Run when Step > 0), and the source's revision and last sequence
// there. The fork's conversation is the source's committed transcript at
// that point, Messages long.
type SessionForked struct {
	Source   string `json:"source"`
	Run      int    `json:"run"`
	Step     int    `json:"step,omitempty"`
	Revision int64  `json:"revision"`
	Seq      int64  `json:"seq"`
	Messages int    `json:"messages"`
}

// SessionRewound records that the session went back to an earlier point:
// from its state after run FromRun at FromRevision, to after run ToRun (or
// after step ToStep of it). The runs after the point stay in the log; the
// transcript is cut to Messages, and Revision is the session's revision
// from now on.
type SessionRewound struct {
	FromRun      int   `json:"from_run"`
	FromRevision int64 `json:"from_revision"`
	ToRun        int   `json:"to_run"`
	ToStep       int   `json:"to_step,omitempty"`
	Revision     int64 `json:"revision"`
	Messages     int   `json:"messages"`
}

func (SessionForked) EventType() string  { return TypeSessionForked }
func (SessionRewound) EventType() string { return TypeSessionRewound }
