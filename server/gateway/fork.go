package gateway

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"go.temporal.io/api/workflowservice/v1"

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

// The forks GET /v1/sessions/{id}/forks lists: limit= of them, by default
// DefaultForksLimit and at most MaxForksLimit.
const (
	DefaultForksLimit = 100
	MaxForksLimit     = 200
)

// ForkSummary is one fork of GET /v1/sessions/{id}/forks. Its point is
// in its own parent (GET /v1/sessions/{fork}): visibility does not hold
// it, and asking each fork would cost a query per fork.
type ForkSummary struct {
	SessionID string `json:"session_id"`
}

// ForksResponse is the answer of GET /v1/sessions/{id}/forks: the forks,
// sorted by ID, and whether visibility holds more than the limit.
type ForksResponse struct {
	Forks     []ForkSummary `json:"forks"`
	Truncated bool          `json:"truncated"`
}

// getForks lists the sessions forked from this one, as Temporal's
// visibility has them (the KeelParent search attribute, docs/contract.md
// §19.1): a fork made a moment ago may be missing while visibility lags,
// and forks made before KeelParent existed are not listed. A key limited
// to a prefix sees only the forks under its prefix, whoever made the
// others: the query asks for those only, and each ID is checked again, so
// neither the list nor truncated tells it of any other. Past the limit,
// the forks listed are the first that visibility answers (running
// sessions first, then by close time, newest first), sorted by ID.
func (g *Gateway) getForks(w http.ResponseWriter, r *http.Request, s *client.Session) {
	limit, err := intParam(r, "limit", DefaultForksLimit, 1)
	if err != nil {
		WriteError(w, err)
		return
	}
	limit = min(limit, MaxForksLimit)
	// The session's ID and the key's prefix hold letters, digits, '-' and
	// '_' only (ValidateSessionID, APIKey check): neither can end a
	// quoted string.
	query := fmt.Sprintf("WorkflowType = '%s' AND %s = '%s'", api.SessionWorkflowName, api.AttrParent.GetName(), s.ID())
	if k := requestKey(r); k != nil && k.prefix != "" {
		query += fmt.Sprintf(" AND WorkflowId STARTS_WITH '%s'", k.prefix)
	}
	ctx, cancel := g.callCtx(r)
	defer cancel()
	out := ForksResponse{Forks: []ForkSummary{}}
	seen := map[string]bool{}
	var token []byte
	for !out.Truncated {
		resp, err := g.c.Temporal().ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: g.c.Namespace(), PageSize: int32(limit) + 1, NextPageToken: token, Query: query,
		})
		if err != nil {
			WriteError(w, err)
			return
		}
		for _, ex := range resp.GetExecutions() {
			// Each hand-over of a fork adds an execution of its ID.
			id := ex.GetExecution().GetWorkflowId()
			if seen[id] || !allowsSession(r, id) {
				continue
			}
			seen[id] = true
			if len(out.Forks) == int(limit) {
				out.Truncated = true
				break
			}
			out.Forks = append(out.Forks, ForkSummary{SessionID: id})
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	slices.SortFunc(out.Forks, func(a, b ForkSummary) int { return strings.Compare(a.SessionID, b.SessionID) })
	writeJSON(w, http.StatusOK, out)
}
