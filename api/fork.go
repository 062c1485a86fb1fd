package api

import "github.com/keelrun/keel"

// Names of the fork and rewind surfaces (docs/contract.md §19).
const (
	// QueryForkPoint answers a session's committed state at a point
	// (ForkPointQuery): what a fork of it starts from.
	QueryForkPoint = "fork_point"
	// UpdateRewind takes a session back to a point (RewindRequest).
	UpdateRewind = "rewind"
)

// Point names a place in a session's conversation: after run Run (0 is
// before the first run), or, when Step > 0, after step Step of run Run:
// the run's prompt, its first Step assistant turns and their tool
// results, and none of its later work.
type Point struct {
	Run  int `json:"run"`
	Step int `json:"step,omitempty"`
}

// ForkPointQuery asks the fork_point query for the state at a point.
type ForkPointQuery struct {
	Point
}

// ForkPoint is a session's committed state at a point: what a fork
// starts from. Transcript travels by value in workflow code; the payload
// codec makes it one content-store reference on the wire.
type ForkPoint struct {
	Origin ForkOrigin `json:"origin"`
	// Config is the source's defaults for its runs, which the fork
	// inherits.
	Config     RunConfig      `json:"config"`
	Transcript []keel.Message `json:"transcript,omitempty"`
}

// ForkOrigin is where a fork came from: its source session, the point, and
// the source's revision and last durable sequence there. For a step point
// they are the source's at the start of the run (the last committed state
// before the point).
type ForkOrigin struct {
	Source string `json:"source"`
	Point
	Revision int64 `json:"revision"`
	Seq      int64 `json:"seq"`
}

// ForkInput starts a session as a fork (SessionInput.Fork): its log begins
// with keel.SessionForked naming Origin, its transcript is Transcript, and
// its revision is the source's there.
type ForkInput struct {
	Origin     ForkOrigin     `json:"origin"`
	Transcript []keel.Message `json:"transcript,omitempty"`
}

// RewindRequest asks a session to go on from a point (UpdateRewind).
type RewindRequest struct {
	Point
}

// RewindResult is what a rewind did: the session's revision, run count and
// last sequence after it (the session.rewound event's).
type RewindResult struct {
	FromRun      int   `json:"from_run"`
	FromRevision int64 `json:"from_revision"`
	Revision     int64 `json:"revision"`
	Seq          int64 `json:"seq"`
	Messages     int   `json:"messages"`
}
