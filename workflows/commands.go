package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
)

// registerCommands installs what the host sends a running run: steering,
// retractions, answers and cancellation. Every decision is made in
// workflow code, one handler at a time, so each race (a retraction against
// the boundary that would apply the steer, an answer against a
// cancellation) has exactly one outcome, recorded in history.
func (r *run) registerCommands(ctx workflow.Context) error {
	if err := workflow.SetUpdateHandlerWithOptions(ctx, api.UpdateSteer,
		func(ctx workflow.Context, req api.SteerRequest) (api.SteerResult, error) { return r.steer(req), nil },
		workflow.UpdateHandlerOptions{Validator: r.validateSteer}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, api.UpdateRetractSteering,
		func(ctx workflow.Context, req api.RetractRequest) (api.RetractResult, error) {
			return api.RetractResult{Result: r.steering.retract(req.SteeringID)}, nil
		},
		workflow.UpdateHandlerOptions{Validator: validateRetract}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, api.UpdateRespond,
		func(ctx workflow.Context, req api.RespondRequest) error { r.host.respond(req); return nil },
		workflow.UpdateHandlerOptions{Validator: r.validateRespond}); err != nil {
		return err
	}
	// The same commands as signals, for callers that cannot wait for an
	// answer (the temporal CLI's `workflow signal`). Invalid ones are logged
	// and dropped: a signal has no way to report an error. Signals are
	// re-run on replay, so they apply fixed limits, never the worker's
	// Rules (validateSteerSignal, validateRespondSignal).
	signals := []struct {
		name   string
		handle func(workflow.Context, workflow.ReceiveChannel)
	}{
		{api.SignalCancel, func(ctx workflow.Context, ch workflow.ReceiveChannel) { ch.Receive(ctx, nil); r.requestCancel() }},
		{api.UpdateSteer, commandSignal("steer", r.validateSteerSignal, func(req api.SteerRequest) { r.steer(req) })},
		{api.UpdateRespond, commandSignal("respond", r.validateRespondSignal, r.host.respond)},
		{api.SignalChildRequests, func(ctx workflow.Context, ch workflow.ReceiveChannel) {
			var sig api.ChildRequests
			ch.Receive(ctx, &sig)
			r.tools.kids.childRequests(sig)
		}},
	}
	for _, s := range signals {
		ch := workflow.GetSignalChannel(ctx, s.name)
		handle := s.handle
		workflow.Go(ctx, func(gctx workflow.Context) {
			for {
				handle(gctx, ch)
			}
		})
	}
	return nil
}

// commandSignal handles one signal carrying a command that is also an
// update: the same validation, and a refused command is logged and dropped.
func commandSignal[Req any](name string, validate func(workflow.Context, Req) error, apply func(Req)) func(workflow.Context, workflow.ReceiveChannel) {
	return func(ctx workflow.Context, ch workflow.ReceiveChannel) {
		var req Req
		ch.Receive(ctx, &req)
		if err := validate(ctx, req); err != nil {
			workflow.GetLogger(ctx).Warn(name+" signal dropped", "err", err)
			return
		}
		apply(req)
	}
}

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
	if err := r.accepting(); err != nil {
		return err
	}
	return r.checkStaged(lim.StagedSteers)
}

// validateSteerSignal checks a steer signal: the same checks under the
// default limits, the staged count behind signalLimitsChange.
func (r *run) validateSteerSignal(ctx workflow.Context, req api.SteerRequest) error {
	if err := checkText("steering text", req.Text, api.MaxPromptBytes); err != nil {
		return err
	}
	if err := r.accepting(); err != nil {
		return err
	}
	if err := r.checkStaged(api.MaxStagedSteers); err != nil && signalLimited(ctx) {
		return err
	}
	return nil
}

func (r *run) steer(req api.SteerRequest) api.SteerResult {
	return api.SteerResult{SteeringID: r.steering.stage(req.Text)}
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
// default limit, behind signalLimitsChange, then as an update.
func (r *run) validateRespondSignal(ctx workflow.Context, req api.RespondRequest) error {
	if err := checkAnswerSize(req, api.MaxAnswerBytes); err != nil && signalLimited(ctx) {
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
