package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel"
)

// registerCommands installs what the host sends a running run: steering,
// retractions, answers and cancellation. Every decision is made in
// workflow code, one handler at a time, so each race (a retraction against
// the boundary that would apply the steer, an answer against a
// cancellation) has exactly one outcome, recorded in history.
func (r *run) registerCommands(ctx workflow.Context) error {
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateSteer,
		func(ctx workflow.Context, req SteerRequest) (SteerResult, error) { return r.steer(req), nil },
		workflow.UpdateHandlerOptions{Validator: r.validateSteer}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateRetractSteering,
		func(ctx workflow.Context, req RetractRequest) (RetractResult, error) {
			return RetractResult{Result: r.steering.retract(req.SteeringID)}, nil
		},
		workflow.UpdateHandlerOptions{}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateRespond,
		func(ctx workflow.Context, req RespondRequest) error { r.host.respond(req); return nil },
		workflow.UpdateHandlerOptions{Validator: r.validateRespond}); err != nil {
		return err
	}
	// The same commands as signals, for callers that cannot wait for an
	// answer (the temporal CLI's `workflow signal`). Invalid ones are logged
	// and dropped: a signal has no way to report an error.
	signals := []struct {
		name   string
		handle func(workflow.Context, workflow.ReceiveChannel)
	}{
		{SignalCancel, func(ctx workflow.Context, ch workflow.ReceiveChannel) { ch.Receive(ctx, nil); r.requestCancel() }},
		{UpdateSteer, commandSignal("steer", r.validateSteer, func(req SteerRequest) { r.steer(req) })},
		{UpdateRespond, commandSignal("respond", r.validateRespond, r.host.respond)},
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
func commandSignal[Req any](name string, validate func(Req) error, apply func(Req)) func(workflow.Context, workflow.ReceiveChannel) {
	return func(ctx workflow.Context, ch workflow.ReceiveChannel) {
		var req Req
		ch.Receive(ctx, &req)
		if err := validate(req); err != nil {
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

func (r *run) validateSteer(req SteerRequest) error {
	if err := checkText("steering text", req.Text); err != nil {
		return err
	}
	return r.accepting()
}

func (r *run) steer(req SteerRequest) SteerResult {
	return SteerResult{SteeringID: r.steering.stage(req.Text)}
}

func (r *run) validateRespond(req RespondRequest) error {
	return r.host.validate(req, r.accepting)
}
