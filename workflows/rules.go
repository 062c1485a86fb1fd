package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel"
)

// Rules are the worker's own checks on what callers send a session: which
// models a run may name. They come from the worker's configuration, never
// from history, and are applied only in update validators, which Temporal
// runs when an update arrives and never on replay: a worker whose rules
// changed still replays every history. A check that a signal handler
// applies runs on replay too, so it must not read Rules.
type Rules struct {
	// AdmitModel reports whether the worker offers the model spec a run
	// would use (after the session's defaults are merged in). Optional:
	// nil admits every spec.
	AdmitModel func(spec string) bool
	// ModelOffer describes the models the worker offers, for the message
	// of a refused send. Optional.
	ModelOffer func() string
}

// admitsModel applies AdmitModel.
func (r Rules) admitsModel(spec string) bool {
	return r.AdmitModel == nil || r.AdmitModel(spec)
}

// modelRefused is the answer to a send whose model the worker does not
// offer. It is the same whatever the spec: it never says why a spec is
// refused or whether a file of that name exists, and never repeats the
// spec; it may list what the worker offers.
func (r Rules) modelRefused() *keel.Error {
	msg := "model: not offered by this worker"
	if r.ModelOffer != nil {
		msg += "; it offers " + r.ModelOffer()
	}
	return &keel.Error{Code: keel.CodeInvalidInput, Message: msg}
}

// Session returns the Session workflow function under these rules, for
// registration as api.SessionWorkflowName.
func (r Rules) Session() func(workflow.Context, SessionInput) error {
	return func(ctx workflow.Context, in SessionInput) error { return sessionWorkflow(ctx, in, r) }
}

// Run returns the Run workflow function under these rules, for
// registration as api.RunWorkflowName.
func (r Rules) Run() func(workflow.Context, RunInput) (*RunResult, error) {
	return func(ctx workflow.Context, in RunInput) (*RunResult, error) { return runWorkflow(ctx, in, r) }
}
