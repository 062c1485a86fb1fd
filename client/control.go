package client

import (
	"context"
	"encoding/json"
	"errors"

	"go.temporal.io/sdk/client"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
)

// Steer sends more user input to the run and returns once the run has
// accepted it. The input enters history at the next model-step boundary
// (after every call of a running tool batch finished); if the model ends
// its turn first, the run continues with it. It fails with
// keel.ErrNotAccepting once the run is ending.
func (r *Run) Steer(ctx context.Context, text string) error {
	_, err := r.SteerRetractable(ctx, text)
	return err
}

// SteerRetractable is Steer returning the steering ID, to retract it with
// RetractSteering while it is still staged.
func (r *Run) SteerRetractable(ctx context.Context, text string) (string, error) {
	var res api.SteerResult
	if err := r.update(ctx, api.UpdateSteer, &res, api.SteerRequest{Text: text}); err != nil {
		return "", err
	}
	return res.SteeringID, nil
}

// RetractSteering withdraws staged steering. The run decides atomically:
// Retracted (it never enters history), AlreadyApplied (it is in history),
// or NotFound.
func (r *Run) RetractSteering(ctx context.Context, steeringID string) (api.Retraction, error) {
	var res api.RetractResult
	if err := r.update(ctx, api.UpdateRetractSteering, &res, api.RetractRequest{SteeringID: steeringID}); err != nil {
		return "", err
	}
	return res.Result, nil
}

// Respond answers a host-input request. The answer is any JSON value and
// must match the request's schema; it is delivered exactly once. Errors:
// keel.ErrUnknownRequest, keel.ErrInvalidAnswer, keel.ErrRequesterGone,
// keel.ErrNotAccepting.
func (r *Run) Respond(ctx context.Context, requestID string, answer any) error {
	raw, ok := answer.(json.RawMessage)
	if !ok {
		b, err := json.Marshal(answer)
		if err != nil {
			return &keel.Error{Code: keel.CodeInvalidAnswer, Message: "answer is not JSON: " + err.Error()}
		}
		raw = b
	}
	return r.update(ctx, api.UpdateRespond, nil, api.RespondRequest{RequestID: requestID, Answer: raw})
}

// Requests returns the run's open host-input requests.
func (r *Run) Requests(ctx context.Context) ([]api.HostRequest, error) {
	st, err := r.State(ctx)
	return st.Requests, err
}

func (r *Run) update(ctx context.Context, name string, out any, arg any) error {
	updateID := newID()
	inline, err := r.inline(ctx)
	if err != nil {
		return err
	}
	if inline {
		arg = forRun(arg, r.ID)
		err := r.s.c.resumeUpdate(ctx, r.s.id, updateID, out, func() (client.WorkflowUpdateHandle, error) {
			return r.s.c.tc.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
				WorkflowID: r.s.id, UpdateID: updateID, UpdateName: name, Args: []any{arg},
				WaitForStage: client.WorkflowUpdateStageCompleted,
			})
		})
		return r.updateError(err)
	}
	err = r.whenStarted(ctx, func() error {
		return r.s.c.resumeUpdate(ctx, r.ID, updateID, out, func() (client.WorkflowUpdateHandle, error) {
			return r.s.c.tc.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
				WorkflowID: r.ID, UpdateID: updateID, UpdateName: name, Args: []any{arg},
				WaitForStage: client.WorkflowUpdateStageCompleted,
			})
		})
	})
	if err != nil {
		return r.updateError(err)
	}
	return nil
}

// updateError maps an update's failure; an update to a run that already
// closed is keel.ErrNotAccepting.
func (r *Run) updateError(err error) error {
	if err == nil {
		return nil
	}
	mapped := fromTemporal(err, "run "+r.ID)
	if errors.Is(mapped, keel.ErrNotFound) || isClosedErr(err) {
		return &keel.Error{Code: keel.CodeNotAccepting, Message: "run " + r.ID + " has ended"}
	}
	return mapped
}

// ActiveRun returns the session's active run, or nil.
func (s *Session) ActiveRun(ctx context.Context) (*Run, error) {
	st, err := s.State(ctx)
	if err != nil || st.ActiveRun == nil {
		return nil, err
	}
	a := st.ActiveRun
	return &Run{s: s, ID: a.RunID, Number: a.Number, BaseSeq: a.BaseSeq, shape: shapeOf(a.Inline)}, nil
}
