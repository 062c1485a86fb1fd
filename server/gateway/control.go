package gateway

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
)

// SteerRequest is the body of POST /v1/sessions/{id}/steer.
type SteerRequest struct {
	Text string `json:"text"`
	// Attachments are images and documents the steering carries, as a
	// run's (RunRequest.Attachments).
	Attachments []keel.Attachment `json:"attachments,omitempty"`
}

// Validate checks the text and the attachments as the run does, before
// any call: 1 to api.MaxPromptBytes bytes of text, at most
// keel.MaxAttachments valid references.
func (req SteerRequest) Validate() error {
	switch {
	case req.Text == "":
		return keel.Errorf(keel.CodeInvalidInput, "text must be 1 to %d bytes of text", api.MaxPromptBytes)
	case len(req.Text) > api.MaxPromptBytes:
		return keel.Errorf(keel.CodeTooLarge, "the steering text is %d bytes; the limit is %d", len(req.Text), api.MaxPromptBytes)
	}
	return keel.CheckAttachments(req.Attachments)
}

// SteerResponse is its answer.
type SteerResponse struct {
	SteeringID string `json:"steering_id"`
	RunID      string `json:"run_id"`
}

// RetractResponse is the answer of DELETE /v1/sessions/{id}/steer/{steering_id}.
type RetractResponse struct {
	Result api.Retraction `json:"result"`
	RunID  string         `json:"run_id"`
}

// RespondRequest is the body of POST /v1/sessions/{id}/respond.
type RespondRequest struct {
	RequestID string          `json:"request_id"`
	Answer    json.RawMessage `json:"answer"`
}

// Validate checks the request before any call: a request ID. The answer
// is checked by the run against the request's schema.
func (req RespondRequest) Validate() error {
	if req.RequestID == "" {
		return keel.Errorf(keel.CodeInvalidInput, "request_id is required (GET .../requests lists the open ones)")
	}
	return nil
}

// StatusResponse answers respond and cancel.
type StatusResponse struct {
	Status string `json:"status"`
	RunID  string `json:"run_id,omitempty"`
}

// RequestsResponse is the answer of GET /v1/sessions/{id}/requests.
type RequestsResponse struct {
	Requests []api.HostRequest `json:"requests"`
	RunID    string            `json:"run_id,omitempty"`
}

// targetRun is the run a command goes to: ?run=N, else the active run;
// nil when the session has no active run.
func targetRun(ctx context.Context, r *http.Request, s *client.Session) (*client.Run, error) {
	n, err := intParam(r, "run", 0, 1)
	if err != nil {
		return nil, err
	}
	if n > 0 {
		return s.Run(int(n)), nil
	}
	return s.ActiveRun(ctx)
}

// activeRun is targetRun for commands that need a run.
func activeRun(ctx context.Context, r *http.Request, s *client.Session) (*client.Run, error) {
	run, err := targetRun(ctx, r, s)
	if err == nil && run == nil {
		err = keel.Errorf(keel.CodeNotAccepting, "session %s has no active run", s.ID())
	}
	return run, err
}

func (g *Gateway) postSteer(w http.ResponseWriter, r *http.Request, s *client.Session) {
	var req SteerRequest
	if err := ReadJSON(r, &req); err != nil {
		WriteError(w, err)
		return
	}
	if err := req.Validate(); err != nil {
		WriteError(w, err)
		return
	}
	ctx, cancel := g.callCtx(r)
	defer cancel()
	run, err := activeRun(ctx, r, s)
	if err != nil {
		WriteError(w, err)
		return
	}
	id, err := run.SteerAttached(ctx, req.Text, req.Attachments...)
	if err != nil {
		WriteError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, SteerResponse{SteeringID: id, RunID: run.ID})
}

func (g *Gateway) deleteSteer(w http.ResponseWriter, r *http.Request, s *client.Session) {
	ctx, cancel := g.callCtx(r)
	defer cancel()
	run, err := activeRun(ctx, r, s)
	if err != nil {
		WriteError(w, err)
		return
	}
	res, err := run.RetractSteering(ctx, r.PathValue("steering_id"))
	if err != nil {
		WriteError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, RetractResponse{Result: res, RunID: run.ID})
}

func (g *Gateway) postRespond(w http.ResponseWriter, r *http.Request, s *client.Session) {
	var req RespondRequest
	if err := ReadJSON(r, &req); err != nil {
		WriteError(w, err)
		return
	}
	if err := req.Validate(); err != nil {
		WriteError(w, err)
		return
	}
	ctx, cancel := g.callCtx(r)
	defer cancel()
	run, err := activeRun(ctx, r, s)
	if err != nil {
		WriteError(w, err)
		return
	}
	if err := run.Respond(ctx, req.RequestID, req.Answer); err != nil {
		WriteError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, StatusResponse{Status: "delivered", RunID: run.ID})
}

func (g *Gateway) postCancel(w http.ResponseWriter, r *http.Request, s *client.Session) {
	n, err := intParam(r, "run", 0, 1)
	if err != nil {
		WriteError(w, err)
		return
	}
	ctx, cancel := g.callCtx(r)
	defer cancel()
	if n > 0 {
		run := s.Run(int(n))
		if err := run.Cancel(ctx); err != nil {
			WriteError(w, err)
			return
		}
		writeJSON(w, http.StatusAccepted, StatusResponse{Status: "cancel_requested", RunID: run.ID})
		return
	}
	if err := s.Cancel(ctx); err != nil {
		WriteError(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, StatusResponse{Status: "cancel_requested"})
}

func (g *Gateway) getRequests(w http.ResponseWriter, r *http.Request, s *client.Session) {
	ctx, cancel := g.callCtx(r)
	defer cancel()
	run, err := targetRun(ctx, r, s)
	if err != nil {
		WriteError(w, err)
		return
	}
	out := RequestsResponse{Requests: []api.HostRequest{}}
	if run != nil {
		reqs, err := run.Requests(ctx)
		if err != nil {
			WriteError(w, err)
			return
		}
		out.RunID = run.ID
		if reqs != nil {
			out.Requests = reqs
		}
	}
	writeJSON(w, http.StatusOK, out)
}
