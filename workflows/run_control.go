package workflows

import (
	"encoding/json"
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/tool"
)

// control is the part of a run the host drives while it runs: steering,
// host-input requests and cancellation. Every decision is made in workflow
// code, one handler at a time, so each race (a retraction against the
// boundary that would apply the steer, an answer against a cancellation)
// has exactly one outcome, recorded in history.
type control struct {
	steers  map[string]*steering
	staged  []*steering
	nSteers int

	requests map[string]*hostRequest
	order    []*hostRequest
	// batchIDs holds the request IDs used in the current tool batch.
	batchIDs map[string]bool
}

type steering struct {
	id, text string
	applied  bool
}

type hostRequest struct {
	HostRequest
	answer   json.RawMessage
	answered bool
	// gone marks a request whose requester stopped waiting (cancelled).
	gone bool
}

func (c *control) init() {
	c.steers = map[string]*steering{}
	c.requests = map[string]*hostRequest{}
	c.batchIDs = map[string]bool{}
}

func (r *run) registerControl(ctx workflow.Context) error {
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateSteer,
		func(ctx workflow.Context, req SteerRequest) (SteerResult, error) { return r.steer(req), nil },
		workflow.UpdateHandlerOptions{Validator: r.validateSteer}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateRetractSteering,
		func(ctx workflow.Context, req RetractRequest) (RetractResult, error) { return r.retract(req), nil },
		workflow.UpdateHandlerOptions{}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateRespond,
		func(ctx workflow.Context, req RespondRequest) error { r.respond(req); return nil },
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
		{UpdateRespond, commandSignal("respond", r.validateRespond, r.respond)},
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

// steer stages input for the next model-step boundary.
func (r *run) steer(req SteerRequest) SteerResult {
	r.nSteers++
	s := &steering{id: fmt.Sprintf("steer-%d", r.nSteers), text: req.Text}
	r.steers[s.id] = s
	r.staged = append(r.staged, s)
	r.emit(keel.SteeringAccepted{SteeringID: s.id, Text: s.text})
	return SteerResult{SteeringID: s.id}
}

// retract withdraws staged steering if it has not been applied yet.
func (r *run) retract(req RetractRequest) RetractResult {
	s, ok := r.steers[req.SteeringID]
	switch {
	case !ok:
		return RetractResult{Result: NotFound}
	case s.applied:
		return RetractResult{Result: AlreadyApplied}
	}
	for i, st := range r.staged {
		if st == s {
			r.staged = append(r.staged[:i:i], r.staged[i+1:]...)
			break
		}
	}
	delete(r.steers, s.id)
	r.emit(keel.SteeringRetracted{SteeringID: s.id})
	return RetractResult{Result: Retracted}
}

// applySteering moves staged steering into history, in acceptance order.
func (r *run) applySteering() {
	for _, s := range r.staged {
		s.applied = true
		r.emit(keel.SteeringApplied{SteeringID: s.id})
		r.messages = append(r.messages, keel.Message{Role: keel.RoleUser, Content: s.text, SteeringID: s.id})
	}
	r.staged = nil
}

func (r *run) validateRespond(req RespondRequest) error {
	h, ok := r.requests[req.RequestID]
	switch {
	case !ok:
		if err := r.accepting(); err != nil {
			return err
		}
		return wireError(&keel.Error{Code: keel.CodeUnknownRequest, Message: fmt.Sprintf("no host-input request %q in run %s", req.RequestID, r.in.RunID)})
	case h.gone:
		return wireError(&keel.Error{Code: keel.CodeRequesterGone, Message: fmt.Sprintf("the call that asked %q is gone", req.RequestID)})
	case h.answered:
		return wireError(&keel.Error{Code: keel.CodeUnknownRequest, Message: fmt.Sprintf("request %q was already answered", req.RequestID)})
	}
	if err := r.accepting(); err != nil {
		return err
	}
	if len(req.Answer) == 0 {
		return wireError(keel.Errorf(keel.CodeInvalidAnswer, "answer to %q is empty", req.RequestID))
	}
	if len(h.Schema) > 0 {
		if err := tool.ValidateJSON(h.Schema, req.Answer); err != nil {
			return wireError(&keel.Error{Code: keel.CodeInvalidAnswer, Message: fmt.Sprintf("answer to %q: %v", req.RequestID, err)})
		}
	} else if !json.Valid(req.Answer) {
		return wireError(keel.Errorf(keel.CodeInvalidAnswer, "answer to %q is not JSON", req.RequestID))
	}
	return nil
}

// respond delivers a validated answer to its request, exactly once.
func (r *run) respond(req RespondRequest) {
	h := r.requests[req.RequestID]
	h.answer, h.answered = req.Answer, true
	r.emit(keel.HostInputResolved{RequestID: h.RequestID, ToolCallID: h.ToolCallID})
	r.refreshState()
}

// ask puts a question to the host for a tool call and waits durably for
// the answer. It fails with ErrDuplicateRequest when the batch already used
// the request ID, and with ErrCancelled when the run is cancelled first.
func (r *run) ask(ctx workflow.Context, callID string, q tool.Question) (json.RawMessage, error) {
	id := callID + "/" + q.ID
	if r.batchIDs[id] {
		return nil, &keel.Error{Code: keel.CodeDuplicateRequest,
			Message: fmt.Sprintf("host-input request %q was already used in this tool batch", id)}
	}
	r.batchIDs[id] = true
	h := &hostRequest{HostRequest: HostRequest{RequestID: id, ToolCallID: callID, Prompt: q.Prompt, Schema: q.Schema}}
	r.requests[id] = h
	r.order = append(r.order, h)
	r.emit(keel.HostInputRequested{RequestID: id, ToolCallID: callID, Prompt: q.Prompt, Schema: q.Schema})
	r.refreshState()
	err := workflow.Await(ctx, func() bool { return h.answered })
	if err != nil || !h.answered {
		r.dropRequest(h)
		return nil, keel.ErrCancelled
	}
	return h.answer, nil
}

// dropRequest closes a request whose requester stopped waiting.
func (r *run) dropRequest(h *hostRequest) {
	if h.answered || h.gone {
		return
	}
	h.gone = true
	r.emit(keel.HostInputResolved{RequestID: h.RequestID, ToolCallID: h.ToolCallID, Interrupted: true})
	r.refreshState()
}

// openRequests returns the requests waiting for an answer, oldest first.
func (r *run) openRequests() []*hostRequest {
	var open []*hostRequest
	for _, h := range r.order {
		if !h.answered && !h.gone {
			open = append(open, h)
		}
	}
	return open
}

// closeRequests marks every open request gone, at the end of a run.
func (r *run) closeRequests() {
	for _, h := range r.openRequests() {
		r.dropRequest(h)
	}
}
