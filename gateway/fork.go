package gateway

import (
	"net/http"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
)

// Forks and rewinds over HTTP (docs/contract.md §19).

// ForkRequest is the body of POST /v1/sessions/{id}/fork: the point (after
// run Run, or after step Step of it) and the new session's ID (generated
// when empty; with a key limited to a prefix, under that prefix).
type ForkRequest struct {
	Run  *int   `json:"run"`
	Step int    `json:"step,omitempty"`
	Into string `json:"into,omitempty"`
}

// ForkResponse is its answer: the new session and where it came from.
type ForkResponse struct {
	SessionID string         `json:"session_id"`
	Parent    api.ForkOrigin `json:"parent"`
}

// RewindRequest is the body of POST /v1/sessions/{id}/rewind.
type RewindRequest struct {
	Run  *int `json:"run"`
	Step int  `json:"step,omitempty"`
}

// point checks a request's point before any call.
func point(run *int, step int) (api.Point, error) {
	if run == nil || *run < 0 || step < 0 || step > 0 && *run == 0 {
		return api.Point{}, keel.Errorf(keel.CodeInvalidInput, "run (0 or more) is required; step, when set, is a step of that run, from 1")
	}
	return api.Point{Run: *run, Step: step}, nil
}

func (g *Gateway) postFork(w http.ResponseWriter, r *http.Request, s *client.Session) {
	var req ForkRequest
	if err := ReadJSON(r, &req); err != nil {
		WriteError(w, err)
		return
	}
	p, err := point(req.Run, req.Step)
	if err != nil {
		WriteError(w, err)
		return
	}
	into := req.Into
	if into == "" {
		// A generated ID stays under the key's prefix, so the caller
		// can use the fork it made.
		into = g.c.NewSession().ID()
		if k := requestKey(r); k != nil && k.prefix != "" {
			into = k.prefix + into
			if len(into) > keel.MaxIDLength {
				into = into[:keel.MaxIDLength]
			}
		}
	}
	if err := keel.ValidateSessionID(into); err != nil {
		WriteError(w, err)
		return
	}
	if !allowsSession(r, into) {
		writeError(w, apiError(http.StatusForbidden, CodeForbidden, "this API key is limited to a session prefix that \"into\" is not under"))
		return
	}
	ctx, cancel := g.callCtx(r)
	defer cancel()
	fork, origin, err := s.Fork(ctx, p, into)
	if err != nil {
		WriteError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, ForkResponse{SessionID: fork.ID(), Parent: origin})
}

func (g *Gateway) postRewind(w http.ResponseWriter, r *http.Request, s *client.Session) {
	var req RewindRequest
	if err := ReadJSON(r, &req); err != nil {
		WriteError(w, err)
		return
	}
	p, err := point(req.Run, req.Step)
	if err != nil {
		WriteError(w, err)
		return
	}
	ctx, cancel := g.callCtx(r)
	defer cancel()
	res, err := s.Rewind(ctx, p)
	if err != nil {
		WriteError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}
