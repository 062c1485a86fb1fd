package workflows

import (
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
)

// Forks and rewinds (docs/contract.md §19). A session records, for every
// run it commits, where the run's messages sit in its transcript (a
// RunMark). A point (after run N, or after step K of run N) is a prefix of
// the transcript found through those marks, so neither a fork nor a
// rewind copies a message or an event: a fork starts a new session from
// the prefix (the payload codec stores it by content), a rewind cuts the
// session's own transcript and records session.rewound in its log.

// markRun records where the run just committed sits in the transcript.
// mark holds what was true before the commit. A compaction replaced the
// transcript before the run: the earlier marks no longer point into it,
// and the run has no step points.
func (s *session) markRun(mark api.RunMark, replaced bool) {
	if replaced {
		s.marks = s.marks[:0:0]
		mark.Start = -1
	}
	mark.End, mark.Revision, mark.Seq = len(s.transcript), s.revision, s.seq
	s.marks = append(s.marks, mark)
}

// startFork makes this new session a fork: its transcript is the source's
// at the point, its revision the source's there, and its log begins with
// session.forked. Everything comes from the input, so a replay (or a
// retried start of the same fork) builds the same first event.
func (s *session) startFork(ctx workflow.Context, f *api.ForkInput) error {
	if err := keel.ValidateSessionID(f.Origin.Source); err != nil {
		return temporal.NewNonRetryableApplicationError(err.Error(), string(keel.CodeInvalidInput), nil)
	}
	origin := f.Origin
	s.origin = &origin
	s.transcript = f.Transcript
	s.revision = origin.Revision
	ev, err := keel.Seal(keel.SessionForked{Source: origin.Source, Run: origin.Run, Step: origin.Step,
		Revision: origin.Revision, Seq: origin.Seq, Messages: len(f.Transcript)}, s.id, "", workflow.Now(ctx))
	if err != nil {
		return err
	}
	s.appendEvent(ev)
	// Run 0 of the fork is the point it was forked at.
	s.marks = []api.RunMark{{Run: 0, Start: 0, End: len(s.transcript), BaseRevision: s.revision,
		BaseSeq: s.seq, Revision: s.revision, Seq: s.seq}}
	return nil
}

// appendEvent adds one of the session's own events to its log.
func (s *session) appendEvent(ev keel.Envelope) {
	ev.Seq = s.seq + 1
	s.events = append(s.events, ev)
	s.seq = ev.Seq
	s.tailBytesHere += ev.Size()
}

// registerForkHandlers installs the fork_point query and the rewind
// update.
func (s *session) registerForkHandlers(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, api.QueryForkPoint, func(q api.ForkPointQuery) (api.ForkPoint, error) {
		at, err := s.locate(q.Point)
		if err != nil {
			return api.ForkPoint{}, err
		}
		return api.ForkPoint{Origin: api.ForkOrigin{Source: s.id, Point: q.Point, Revision: at.revision, Seq: at.seq},
			Config: s.cfg, Transcript: s.transcript[:at.messages]}, nil
	}); err != nil {
		return err
	}
	return workflow.SetUpdateHandlerWithOptions(ctx, api.UpdateRewind, s.rewind,
		workflow.UpdateHandlerOptions{Validator: s.validateRewind})
}

// validateRewind refuses a rewind while a run is active or waiting, and a
// point the session cannot go back to, before it enters history.
func (s *session) validateRewind(req api.RewindRequest) error {
	if err := s.idleForRewind(); err != nil {
		return err
	}
	_, err := s.locate(req.Point)
	return err
}

func (s *session) idleForRewind() error {
	if s.active != nil || s.current != nil || len(s.queue) > 0 || s.admitting > 0 {
		return wireError(&keel.Error{Code: keel.CodeRunActive,
			Message: "session " + s.id + " has a run active or waiting; rewind it once the run is committed"})
	}
	return nil
}

// rewind takes the session back to a point: the transcript is cut there,
// the marks of the runs after it go, the revision moves on by one (the
// history changed), and session.rewound records from where to where. The
// log keeps every event; run numbers go on from the last run.
func (s *session) rewind(ctx workflow.Context, req api.RewindRequest) (api.RewindResult, error) {
	// A send accepted in the same workflow task may have queued a run.
	if err := s.idleForRewind(); err != nil {
		return api.RewindResult{}, err
	}
	at, err := s.locate(req.Point)
	if err != nil {
		return api.RewindResult{}, err
	}
	res := api.RewindResult{FromRun: s.runs, FromRevision: s.revision, Revision: s.revision + 1, Messages: at.messages}
	ev, err := keel.Seal(keel.SessionRewound{FromRun: res.FromRun, FromRevision: res.FromRevision, ToRun: req.Run,
		ToStep: req.Step, Revision: res.Revision, Messages: res.Messages}, s.id, "", workflow.Now(ctx))
	if err != nil {
		return api.RewindResult{}, wireError(internalError("rewind: %v", err))
	}
	// Clipped, so that the next run's messages never overwrite the old
	// ones in a shared array.
	s.transcript = s.transcript[:at.messages:at.messages]
	keep := 0
	for _, m := range s.marks {
		if m.Run < req.Run || m.Run == req.Run && req.Step == 0 {
			keep++
		}
	}
	s.marks = append([]api.RunMark(nil), s.marks[:keep]...)
	s.revision = res.Revision
	s.appendEvent(ev)
	res.Seq = s.seq
	s.setState(keel.StateIdle)
	return res, nil
}

// pointState is what a point holds: the transcript's length there, and the
// session's revision and last sequence at the last commit before it.
type pointState struct {
	messages int
	revision int64
	seq      int64
}

// locate finds a point in the committed transcript. It refuses a point
// inside or after the active run (keel.RunActive), a run the session never
// committed or went back before (keel.NotFound), and a run whose place the
// session does not know: committed before marks existed, or before a
// compaction that replaced the transcript (keel.NotFound, saying which).
func (s *session) locate(p api.Point) (pointState, error) {
	if p.Run < 0 || p.Step < 0 {
		return pointState{}, wireError(keel.Errorf(keel.CodeInvalidInput, "run %d, step %d: a point is a run number and a step, 0 or more", p.Run, p.Step))
	}
	if ref := s.activeRef(); ref != nil && p.Run >= ref.Number || s.current != nil && p.Run >= s.current.in.Number {
		return pointState{}, wireError(&keel.Error{Code: keel.CodeRunActive,
			Message: keel.RunID(s.id, p.Run) + " is not committed yet; fork or rewind at a committed run"})
	}
	if p.Run > s.runs {
		return pointState{}, wireError(keel.Errorf(keel.CodeNotFound, "session %s has %d runs; run %d does not exist", s.id, s.runs, p.Run))
	}
	m, ok := s.mark(p.Run)
	if !ok {
		return pointState{}, wireError(keel.Errorf(keel.CodeNotFound,
			"run %d of session %s is no longer in its history (rewound, compacted, or committed before forks existed)", p.Run, s.id))
	}
	if p.Step == 0 {
		return pointState{messages: m.End, revision: m.Revision, seq: m.Seq}, nil
	}
	if p.Run == 0 || m.Start < 0 {
		return pointState{}, wireError(keel.Errorf(keel.CodeNotFound, "run %d of session %s has no step points", p.Run, s.id))
	}
	end, ok := stepEnd(s.transcript[m.Start:m.End], p.Step)
	if !ok {
		return pointState{}, wireError(keel.Errorf(keel.CodeNotFound, "run %d of session %s has fewer than %d steps", p.Run, s.id, p.Step))
	}
	return pointState{messages: m.Start + end, revision: m.BaseRevision, seq: m.BaseSeq}, nil
}

// mark returns the mark of run n. Run 0 of a session that is no fork is
// the empty conversation before its first run.
func (s *session) mark(n int) (api.RunMark, bool) {
	for _, m := range s.marks {
		if m.Run == n {
			return m, true
		}
	}
	if n == 0 && s.origin == nil {
		return api.RunMark{}, true
	}
	return api.RunMark{}, false
}

// stepEnd returns how many of a run's messages the point after step k
// keeps: through its k-th assistant turn and the tool results that answer
// it. Steering that arrived for the next step is left out.
func stepEnd(run []keel.Message, k int) (int, bool) {
	seen := 0
	for i, m := range run {
		if m.Role != keel.RoleAssistant {
			continue
		}
		if seen++; seen < k {
			continue
		}
		end := i + 1
		for end < len(run) && run[end].Role == keel.RoleTool {
			end++
		}
		return end, true
	}
	return 0, false
}
