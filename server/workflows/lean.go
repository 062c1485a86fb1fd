package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/server/activities"
)

// An execution of api.ShapeLean records nothing but what its runs need:
// no commit markers (readers check a query answer's workflow task,
// tasks.go), no search-attribute upserts, and no local activity to learn
// whether keel is shut down. What those told the session comes with
// its model turns' results instead, which history records anyway:
//   - whether keel is shut down, asked by the first turn of a new session
//     (docs/contract.md §13): shut down, that run fails with
//     runtime_shutdown before anything is sent, and later sends are
//     refused;
//   - the worker's event sinks (docs/contract.md §23.6): an execution
//     delivers to those the session's last successful turn named, carried
//     across continue-as-new, from its start; a new session from its
//     first successful turn.

// lean says the session is of api.ShapeLean; one without it runs as
// keel v0.1.0's did.
func (s *session) lean() bool { return s.shape >= api.ShapeLean }

// startLean starts the deliveries to the sinks the session carries.
func (s *session) startLean(ctx workflow.Context) {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	s.startSinks(dctx, s.st.SinkNames)
}

// checkInTurns leaves the runtime check of a new session to its first
// model turn: sends are admitted at once.
func (s *session) checkInTurns() {
	s.checked, s.st.Unchecked = true, true
}

// leanRun wires what r's model turns say of the worker into the session.
func (s *session) leanRun(r *run) {
	r.model.unchecked = func() bool { return s.st.Unchecked }
	r.model.worker = func(res *activities.ModelTurnResult) {
		s.st.Unchecked, s.st.SinkNames = false, res.Sinks
		if !s.sinks.on && !s.ended {
			s.startLean(s.root)
		}
	}
	r.model.shutDown = func() {
		s.st.Unchecked = false
		s.refuseQueued()
	}
}
