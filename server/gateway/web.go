package gateway

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
)

// webFiles are the web page served at / (docs/gateway.md, "Web page"):
// plain HTML, CSS and JavaScript, so `make run` needs no Node build.
//
//go:embed web
var webFiles embed.FS

// Session lists of GET /v1/sessions.
const (
	DefaultSessionsLimit = 50
	MaxSessionsLimit     = 200
)

// SessionSummary is one session of GET /v1/sessions.
type SessionSummary struct {
	ID string `json:"id"`
	// Status is Temporal's status of the Session workflow's latest
	// execution: "running", or how it stopped ("terminated", "failed",
	// "continuedasnew" for an older execution). A session between runs is
	// "running" here: its workflow waits for the next prompt.
	Status string `json:"status"`
	// State is keel's state of the session: "idle", "running",
	// "waiting_for_host_input", "cancelling", "completed", "failed", or
	// "terminated" for a workflow stopped from outside. A running
	// session's comes from its state query, "idle" when it did not answer
	// in time.
	State keel.SessionState `json:"state"`
	// Active says a run is in progress (State.Active), so it can be
	// cancelled.
	Active    bool      `json:"active"`
	StartedAt time.Time `json:"started_at"`
}

// SessionsResponse is the answer of GET /v1/sessions.
type SessionsResponse struct {
	Sessions []SessionSummary `json:"sessions"`
	// Namespace is the Temporal namespace of the sessions, and WebUI the
	// Temporal Web UI's base URL when the gateway knows it
	// (Options.WebUIURL), for links to a session's or a run's workflow.
	Namespace string `json:"namespace"`
	WebUI     string `json:"web_ui,omitempty"`
}

// routeWeb mounts the web page (without a key: it asks for one) and the
// session list it opens with.
func (g *Gateway) routeWeb() {
	page, err := fs.Sub(webFiles, "web")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.FileServerFS(page)
	g.HandlePublic(http.MethodGet, "/{$}", noCache(files))
	g.HandlePublic(http.MethodGet, "/web/", noCache(http.StripPrefix("/web", files)))
	// The list shows a prefixed key its own sessions only.
	g.handle(Route{Method: http.MethodGet, Path: "/v1/sessions", sessions: true}, http.HandlerFunc(g.listSessions))
}

// noCache makes a browser ask again for the page's files, so a new keel
// binary's page is never mixed with an old cached script.
func noCache(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		h.ServeHTTP(w, r)
	})
}

// listSessions lists the newest sessions through Temporal's visibility
// API: a session is a Session workflow whose ID is the session ID, and
// each hand-over (continue-as-new) adds an execution of the same ID. A
// key limited to a prefix sees the sessions under it only (the query asks
// for them, and each ID is checked again).
func (g *Gateway) listSessions(w http.ResponseWriter, r *http.Request) {
	query := fmt.Sprintf("WorkflowType = '%s'", api.SessionWorkflowName)
	if k := requestKey(r); k != nil && k.prefix != "" {
		// The prefix holds letters, digits, '-' and '_' only (APIKey
		// check), so it cannot end the quoted string.
		query += fmt.Sprintf(" AND WorkflowId STARTS_WITH '%s'", k.prefix)
	}
	limit, err := intParam(r, "limit", DefaultSessionsLimit, 1)
	if err != nil {
		WriteError(w, err)
		return
	}
	limit = min(limit, MaxSessionsLimit)
	ctx, cancel := g.callCtx(r)
	defer cancel()
	out := SessionsResponse{Sessions: []SessionSummary{}, Namespace: g.c.Namespace(),
		WebUI: strings.TrimRight(g.opts.WebUIURL, "/")}
	seen := map[string]bool{}
	var token []byte
	for len(out.Sessions) < int(limit) {
		resp, err := g.c.Temporal().ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace:     g.c.Namespace(),
			PageSize:      int32(limit),
			NextPageToken: token,
			// Running executions first, then by close time, newest first
			// (Temporal's order; SQL visibility takes no ORDER BY).
			Query: query,
		})
		if err != nil {
			WriteError(w, err)
			return
		}
		for _, ex := range resp.GetExecutions() {
			id := ex.GetExecution().GetWorkflowId()
			if seen[id] || len(out.Sessions) == int(limit) || !allowsSession(r, id) {
				continue
			}
			seen[id] = true
			out.Sessions = append(out.Sessions, SessionSummary{ID: id, Status: statusName(ex.GetStatus()),
				State: closedState(ex.GetStatus()), StartedAt: ex.GetStartTime().AsTime()})
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	g.askStates(ctx, out.Sessions)
	writeJSON(w, http.StatusOK, out)
}

// The running sessions of a list are asked their state listStateQueries
// at a time, all within listStateTimeout, so that a session whose worker
// is gone slows the list by that much at most.
const (
	listStateQueries = 16
	listStateTimeout = 2 * time.Second
)

// askStates fills in the state of each running session with its state
// query: visibility cannot say it, since a lean session upserts no
// KeelState (api.ShapeLean). A session that does not
// answer in time reads idle.
func (g *Gateway) askStates(ctx context.Context, list []SessionSummary) {
	ctx, cancel := context.WithTimeout(ctx, listStateTimeout)
	defer cancel()
	sem := make(chan struct{}, listStateQueries)
	var wg sync.WaitGroup
	for i := range list {
		s := &list[i]
		if s.Status != statusName(enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING) {
			continue
		}
		s.State = keel.StateIdle
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if st, err := g.c.Session(s.ID).State(ctx); err == nil && st.State != "" {
				s.State = st.State
			}
		}()
	}
	wg.Wait()
	for i := range list {
		list[i].Active = list[i].State.Active()
	}
}

// statusName is a workflow status in lower case: "running", "terminated".
func statusName(s enumspb.WorkflowExecutionStatus) string { return strings.ToLower(s.String()) }

// closedState is keel's state of a session whose latest execution
// closed with status: a Session workflow never ends by itself, so it
// failed or was stopped from outside, as the state query reports it
// (docs/contract.md §10.3). A running one's is asked (askStates).
func closedState(status enumspb.WorkflowExecutionStatus) keel.SessionState {
	if status == enumspb.WORKFLOW_EXECUTION_STATUS_FAILED {
		return keel.StateFailed
	}
	return keel.StateTerminated
}
