package workflows

import (
	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
)

// What the host sends a running run, through its session's handlers
// (handlers.go): steering, retractions, answers and cancellation.

// accepting reports whether the run still takes commands.
func (r *run) accepting() error {
	if r.outcome != nil || r.cancelled() {
		return wireError(&keel.Error{Code: keel.CodeNotAccepting, Message: "run " + r.in.RunID + " no longer accepts commands"})
	}
	return nil
}

// requestCancel starts cooperative cancellation. It is idempotent.
func (r *run) requestCancel() {
	if r.outcome != nil {
		return
	}
	r.cancelWork()
	r.refreshState()
}

// validateSteer checks a steer update under the worker's limits.
func (r *run) validateSteer(req api.SteerRequest) error {
	lim := r.rules.limits()
	if err := checkText("steering text", req.Text, lim.SteeringBytes); err != nil {
		return err
	}
	if err := r.rules.admitsAttachments(r.cfg.Model, req.Attachments); err != nil {
		return wireError(err)
	}
	if err := r.accepting(); err != nil {
		return err
	}
	return r.checkStaged(lim.StagedSteers)
}

// validateSteerSignal checks a steer signal: the same checks under the
// default limits, which a replay applies as the execution did.
func (r *run) validateSteerSignal(req api.SteerRequest) error {
	if err := checkText("steering text", req.Text, api.MaxPromptBytes); err != nil {
		return err
	}
	if err := keel.CheckAttachments(req.Attachments); err != nil {
		return wireError(err.(*keel.Error))
	}
	if err := r.accepting(); err != nil {
		return err
	}
	return r.checkStaged(api.MaxStagedSteers)
}

func (r *run) steer(req api.SteerRequest) api.SteerResult {
	return api.SteerResult{SteeringID: r.steering.stage(req.Text, req.Attachments)}
}

// validateRespond checks a respond update under the worker's limits; the
// size first, so that an answer too large is not matched against a
// schema.
func (r *run) validateRespond(req api.RespondRequest) error {
	if err := checkAnswerSize(req, r.rules.limits().AnswerBytes); err != nil {
		return err
	}
	return r.host.validate(req, r.accepting)
}

// validateRespondSignal checks a respond signal: the size under the
// default limit, then as an update.
func (r *run) validateRespondSignal(req api.RespondRequest) error {
	if err := checkAnswerSize(req, api.MaxAnswerBytes); err != nil {
		return err
	}
	return r.host.validate(req, r.accepting)
}

// validateRetract refuses, before it enters history, a retraction whose
// steering ID is longer than any keel makes.
func validateRetract(req api.RetractRequest) error {
	if len(req.SteeringID) > api.MaxSteeringIDBytes {
		return tooLarge("steering_id", len(req.SteeringID), api.MaxSteeringIDBytes)
	}
	return nil
}
