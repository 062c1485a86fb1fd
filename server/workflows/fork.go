package workflows

import (
	"errors"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/carry"
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
func (s *session) markRun(mark carry.RunMark, replaced bool) {
	if replaced {
		s.st.Marks = s.st.Marks[:0:0]
		mark.Start = -1
	}
	mark.End, mark.Revision, mark.Seq = len(s.st.Transcript), s.st.Revision, s.st.Seq
	s.st.Marks = append(s.st.Marks, mark)
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
	s.st.Origin = &origin
	s.st.Transcript = f.Transcript
	s.st.Revision = origin.Revision
	ev, err := keel.Seal(keel.SessionForked{Source: origin.Source, Run: origin.Run, Step: origin.Step,
		Revision: origin.Revision, Seq: origin.Seq, Messages: len(f.Transcript)}, s.id, "", workflow.Now(ctx))
	if err != nil {
		return err
	}
	s.appendEvent(ev)
	// Run 0 of the fork is the point it was forked at.
	s.st.Marks = []carry.RunMark{{Run: 0, Start: 0, End: len(s.st.Transcript), BaseRevision: s.st.Revision,
		BaseSeq: s.st.Seq, Revision: s.st.Revision, Seq: s.st.Seq}}
	return nil
}

// startConversation makes this new session begin with a conversation
// (an eval case's, docs/contract.md §24.1): its transcript before its
// first run, which is its run 0, so a fork at run 0 starts from it. It
// came with the session's input, from no session, so no event records
// it: the session's history (the history query) shows it, and its log
// begins with its first run. Only each message's role and text are
// kept.
func (s *session) startConversation(msgs []keel.Message) error {
	if err := api.CheckConversation(msgs); err != nil {
		code := keel.CodeInvalidInput
		var ke *keel.Error
		if errors.As(err, &ke) {
			code = ke.Code
		}
		return temporal.NewNonRetryableApplicationError(err.Error(), string(code), nil)
	}
	s.st.Transcript = make([]keel.Message, len(msgs))
	for i, m := range msgs {
		s.st.Transcript[i] = keel.Message{Role: m.Role, Content: m.Content}
	}
	s.st.Marks = []carry.RunMark{{Run: 0, Start: 0, End: len(s.st.Transcript)}}
	return nil
}

// forkPoint answers the fork_point query: what a fork at a point starts
// from.
func (s *session) forkPoint(q api.ForkPointQuery) (api.ForkPoint, error) {
	at, err := s.locate(q.Point)
	if err != nil {
		return api.ForkPoint{}, err
	}
	return api.ForkPoint{Origin: api.ForkOrigin{Source: s.id, Point: q.Point, Revision: at.revision, Seq: at.seq},
		Config: s.cfg, Transcript: s.st.Transcript[:at.messages]}, nil
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
	if s.run != nil || len(s.queue) > 0 || s.admitting > 0 {
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
	res := api.RewindResult{FromRun: s.st.Runs, FromRevision: s.st.Revision, Revision: s.st.Revision + 1, Messages: at.messages}
	ev, err := keel.Seal(keel.SessionRewound{FromRun: res.FromRun, FromRevision: res.FromRevision, ToRun: req.Run,
		ToStep: req.Step, Revision: res.Revision, Messages: res.Messages}, s.id, "", workflow.Now(ctx))
	if err != nil {
		return api.RewindResult{}, wireError(internalError("rewind: %v", err))
	}
	// Clipped, so that the next run's messages never overwrite the old
	// ones in a shared array.
	s.st.Transcript = s.st.Transcript[:at.messages:at.messages]
	keep := 0
	for _, m := range s.st.Marks {
		if m.Run < req.Run || m.Run == req.Run && req.Step == 0 {
			keep++
		}
	}
	s.st.Marks = append([]carry.RunMark(nil), s.st.Marks[:keep]...)
	s.st.Revision = res.Revision
	s.appendEvent(ev)
	res.Seq = s.st.Seq
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
	if s.run != nil && p.Run >= s.run.in.Number {
		return pointState{}, wireError(&keel.Error{Code: keel.CodeRunActive,
			Message: keel.RunID(s.id, p.Run) + " is not committed yet; fork or rewind at a committed run"})
	}
	if p.Run > s.st.Runs {
		return pointState{}, wireError(keel.Errorf(keel.CodeNotFound, "session %s has %d runs; run %d does not exist", s.id, s.st.Runs, p.Run))
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
	end, ok := stepEnd(s.st.Transcript[m.Start:m.End], p.Step)
	if !ok {
		return pointState{}, wireError(keel.Errorf(keel.CodeNotFound, "run %d of session %s has fewer than %d steps", p.Run, s.id, p.Step))
	}
	return pointState{messages: m.Start + end, revision: m.BaseRevision, seq: m.BaseSeq}, nil
}

// mark returns the mark of run n. Run 0 of a session that is no fork is
// the empty conversation before its first run.
func (s *session) mark(n int) (carry.RunMark, bool) {
	for _, m := range s.st.Marks {
		if m.Run == n {
			return m, true
		}
	}
	if n == 0 && s.st.Origin == nil {
		return carry.RunMark{}, true
	}
	return carry.RunMark{}, false
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
