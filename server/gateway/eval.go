package gateway

import (
	"net/http"
	"strings"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
)

// Evals over HTTP (docs/contract.md §24, docs/evals.md). A key limited
// to a session prefix reaches only the evals whose IDs are under it (so
// are their cases' sessions), and may replay only recorded sessions
// under it; any other eval answers 404 as one that does not exist. A
// read-only key may read status and reports only.

func (g *Gateway) routeEvals() {
	// The path names no session: each handler checks the key's prefix.
	route := func(method, path string, h http.HandlerFunc) {
		g.handle(Route{Method: method, Path: path, sessions: true}, h)
	}
	route(http.MethodPost, "/v1/evals", g.postEval)
	route(http.MethodGet, "/v1/evals/{eval}", g.evalRoute(g.getEval))
	route(http.MethodGet, "/v1/evals/{eval}/report", g.evalRoute(g.getEvalReport))
	route(http.MethodPost, "/v1/evals/{eval}/cancel", g.evalRoute(g.cancelEval))
}

// EvalStarted is the answer of POST /v1/evals.
type EvalStarted struct {
	ID string `json:"id"`
}

func (g *Gateway) postEval(w http.ResponseWriter, r *http.Request) {
	var in api.EvalInput
	if err := ReadJSON(r, &in); err != nil {
		WriteError(w, err)
		return
	}
	if err := in.Validate(); err != nil {
		WriteError(w, err)
		return
	}
	if k := requestKey(r); k != nil && k.prefix != "" {
		under := strings.HasPrefix(in.ID, k.prefix) && (in.SessionPrefix == "" || strings.HasPrefix(in.SessionPrefix, k.prefix))
		for _, s := range in.Sessions {
			under = under && strings.HasPrefix(s, k.prefix)
		}
		if !under {
			writeError(w, apiError(http.StatusForbidden, CodeForbidden,
				"this API key is limited to a session prefix: the eval's ID and its recorded sessions must be under it"))
			return
		}
	}
	ctx, cancel := g.callCtx(r)
	defer cancel()
	ev, err := g.c.StartEval(ctx, in)
	if err != nil {
		WriteError(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, EvalStarted{ID: ev.ID()})
}

// evalRoute checks the eval's ID in the path against the key's prefix.
func (g *Gateway) evalRoute(next func(w http.ResponseWriter, r *http.Request, id string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("eval")
		if err := keel.ValidateSessionID(id); err != nil || len(id) > api.MaxEvalIDLength {
			WriteError(w, keel.Errorf(keel.CodeInvalidInput, "eval ID: 1 to %d letters, digits, '-' and '_'", api.MaxEvalIDLength))
			return
		}
		if !allowsSession(r, id) {
			WriteError(w, keel.Errorf(keel.CodeNotFound, "eval %s not found", id))
			return
		}
		next(w, r, id)
	}
}

func (g *Gateway) getEval(w http.ResponseWriter, r *http.Request, id string) {
	ctx, cancel := g.callCtx(r)
	defer cancel()
	st, err := g.c.Eval(id).Status(ctx)
	if err != nil {
		WriteError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// getEvalReport answers an eval's report once it ended; while it runs,
// 409 with its status in the message.
func (g *Gateway) getEvalReport(w http.ResponseWriter, r *http.Request, id string) {
	ctx, cancel := g.callCtx(r)
	defer cancel()
	ev := g.c.Eval(id)
	st, err := ev.Status(ctx)
	if err == nil && st.State == api.EvalRunning {
		err = keel.Errorf(keel.CodeRunActive, "eval %s is running: %d of %d cases done", id, st.Done, st.Total)
	}
	if err != nil {
		WriteError(w, err)
		return
	}
	rep, err := ev.Report(ctx)
	if err != nil {
		WriteError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

func (g *Gateway) cancelEval(w http.ResponseWriter, r *http.Request, id string) {
	ctx, cancel := g.callCtx(r)
	defer cancel()
	if err := g.c.Eval(id).Cancel(ctx); err != nil {
		WriteError(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, StatusResponse{Status: "cancel_requested"})
}
