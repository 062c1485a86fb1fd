package client

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"go.temporal.io/sdk/client"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/live"
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
	return r.SteerAttached(ctx, text)
}

// SteerAttached is SteerRetractable with attachments (Client.Attach) the
// steering carries.
func (r *Run) SteerAttached(ctx context.Context, text string, atts ...keel.Attachment) (string, error) {
	var res api.SteerResult
	if err := r.update(ctx, api.UpdateSteer, &res, api.SteerRequest{Text: text, Attachments: atts}); err != nil {
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
// keel.ErrNotAccepting. A request of a child session that the run lists
// ("PATH:ID", api.HostRequest.Path) is answered in the child.
func (r *Run) Respond(ctx context.Context, requestID string, answer any) error {
	raw, ok := answer.(json.RawMessage)
	if !ok {
		b, err := json.Marshal(answer)
		if err != nil {
			return &keel.Error{Code: keel.CodeInvalidAnswer, Message: "answer is not JSON: " + err.Error()}
		}
		raw = b
	}
	if owner, local, ok := r.childRequest(ctx, requestID); ok {
		// A child session's request, as the parent lists it: the child
		// takes the answer (docs/contract.md §21.4).
		child, err := owner.ActiveRun(ctx)
		if err != nil {
			return err
		}
		if child == nil {
			return &keel.Error{Code: keel.CodeRequesterGone, Message: "child session " + owner.ID() + " has no active run"}
		}
		return child.update(ctx, api.UpdateRespond, nil, api.RespondRequest{RequestID: local, Answer: raw})
	}
	return r.update(ctx, api.UpdateRespond, nil, api.RespondRequest{RequestID: requestID, Answer: raw})
}

// childRequest finds, for an ID of the form "PATH:ID", the request of a
// child session that the run lists under it: the child's session and the
// request's own ID there.
func (r *Run) childRequest(ctx context.Context, requestID string) (*Session, string, bool) {
	path, _, ok := strings.Cut(requestID, ":")
	if !ok || !live.ValidPath(path) {
		return nil, "", false
	}
	st, err := r.State(ctx)
	if err != nil {
		return nil, "", false
	}
	for _, q := range st.Requests {
		if q.RequestID == requestID && q.SessionID != "" && q.Path != "" {
			if keel.ValidateSessionID(q.SessionID) != nil {
				return nil, "", false
			}
			return r.s.c.Session(q.SessionID), strings.TrimPrefix(requestID, q.Path+":"), true
		}
	}
	return nil, "", false
}

// Requests returns the run's open host-input requests.
func (r *Run) Requests(ctx context.Context) ([]api.HostRequest, error) {
	st, err := r.State(ctx)
	return st.Requests, err
}

func (r *Run) update(ctx context.Context, name string, out any, arg any) error {
	updateID := newID()
	arg = forRun(arg, r.ID)
	err := r.s.c.resumeUpdate(ctx, r.s.id, updateID, out, func() (client.WorkflowUpdateHandle, error) {
		return r.s.c.tc.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
			WorkflowID: r.s.id, UpdateID: updateID, UpdateName: name, Args: []any{arg},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		})
	})
	return r.updateError(err)
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
	return &Run{s: s, ID: a.RunID, Number: a.Number, BaseSeq: a.BaseSeq}, nil
}
