package workflows

import (
	"slices"

	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/carry"
	"github.com/keelrun/keel/internal/delegation"
)

// A child session (carry.SessionInput.Delegated, docs/contract.md §21.3) is a
// session whose first and only run is its delegation's task. It
// takes no prompts; once that run is committed it returns the run's
// outcome to its parent and ends, so it never continues as new. Its log,
// transcript and state stay readable like any session's.

// startDelegated makes the session a child: the task is its first run.
func (s *session) startDelegated(in carry.SessionInput) {
	s.delegated = in.Delegated
	// The parent knows keel is not shut down, or it would not run: a
	// shutdown that comes later cancels the parent's run, and with it
	// this child. Asking again (a local activity that queries the
	// runtime's workflow) would cost every delegation a round trip.
	s.checked = true
	if in.Carry == nil {
		s.queue = append(s.queue, &pendingRun{number: 1, req: api.SendRequest{Prompt: in.Delegated.Prompt}})
	}
}

// admitDelegated ends the child without a run if keel was shut down
// (the shutdown signal reached it before its run started;
// docs/contract.md §13).
func (s *session) admitDelegated(ctx workflow.Context) bool {
	if err := workflow.Await(ctx, func() bool { return s.checked }); err != nil {
		s.endUnrun(keel.StatusCancelled, nil)
		return false
	}
	if s.st.Shutdown {
		s.endUnrun(keel.StatusFailed, keel.ErrRuntimeShutdown)
		return false
	}
	return true
}

// endUnrun ends a child session whose run never started.
func (s *session) endUnrun(status keel.RunStatus, err *keel.Error) {
	if s.delegated == nil {
		return
	}
	s.result = &delegation.DelegationResult{Outcome: keel.Outcome{RunID: keel.RunID(s.id, 1), Number: 1,
		Status: status, Revision: s.st.Revision, Error: err}}
}

// reportRequests tells the parent the host-input requests open in this
// child's run and in its own children, when they changed: the parent
// lists them, with their paths, among its own (docs/contract.md §21.4).
func (s *session) reportRequests(ctx workflow.Context, r *run) {
	d := s.delegated
	reqs := asChild(d.Path, s.id, r.host.open(), r.tools.kids.open())
	ids := make([]string, len(reqs))
	for i, q := range reqs {
		ids[i] = q.RequestID
	}
	if slices.Equal(ids, s.reported) {
		return
	}
	s.reported = ids
	// Fire and forget: the parent only lists them; a cancelled run still
	// reports its closed requests.
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	workflow.SignalExternalWorkflow(dctx, d.Parent, "", delegation.SignalChildRequests, delegation.ChildRequests{Path: d.Path, Requests: reqs})
}
