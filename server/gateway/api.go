package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/internal/httpguard"
)

// routeAPI mounts the /v1 API. docs/gateway.md describes each route and
// openapi.json documents them; TestOpenAPICoversRoutes keeps the three
// in step.
func (g *Gateway) routeAPI() {
	g.HandlePublic(http.MethodGet, "/v1/openapi.json", http.HandlerFunc(serveOpenAPI))
	g.Handle(http.MethodPost, "/v1/sessions/{id}/runs", g.session(g.postRun))
	g.Handle(http.MethodGet, "/v1/sessions/{id}", g.session(g.getState))
	g.Handle(http.MethodGet, "/v1/sessions/{id}/history", g.session(g.getHistory))
	g.Handle(http.MethodGet, "/v1/sessions/{id}/events", g.session(g.getEvents))
	g.handle(Route{Method: http.MethodPost, Path: "/v1/sessions/{id}/steer", maxBody: MaxSteerBodyBytes}, g.session(g.postSteer))
	g.Handle(http.MethodDelete, "/v1/sessions/{id}/steer/{steering_id}", g.session(g.deleteSteer))
	g.Handle(http.MethodPost, "/v1/sessions/{id}/respond", g.session(g.postRespond))
	g.Handle(http.MethodPost, "/v1/sessions/{id}/cancel", g.session(g.postCancel))
	g.Handle(http.MethodGet, "/v1/sessions/{id}/requests", g.session(g.getRequests))
	g.Handle(http.MethodPost, "/v1/sessions/{id}/fork", g.session(g.postFork))
	g.Handle(http.MethodPost, "/v1/sessions/{id}/rewind", g.session(g.postRewind))
	g.Handle(http.MethodGet, "/v1/sessions/{id}/forks", g.session(g.getForks))
	// AG-UI names its session (threadId) in the body: postAGUI checks it
	// against the key's prefix.
	g.handle(Route{Method: http.MethodPost, Path: "/v1/ag-ui", sessions: true}, http.HandlerFunc(g.postAGUI))
	// An upload belongs to no session: see postAttachment.
	g.handle(Route{Method: http.MethodPost, Path: "/v1/attachments", ownBody: MaxAttachmentBodyBytes, noSession: true},
		http.HandlerFunc(g.postAttachment))
	g.routeSchedules()
	g.routeInterop()
	g.routeEvals()
}

// sessionHandler serves one session's route.
type sessionHandler func(w http.ResponseWriter, r *http.Request, s *client.Session)

// session checks the {id} of the path and hands the session on.
func (g *Gateway) session(h sessionHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if err := keel.ValidateSessionID(id); err != nil {
			WriteError(w, err)
			return
		}
		h(w, r, g.c.Session(id))
	})
}

// callCtx bounds a non-streaming request's calls to Temporal.
func (g *Gateway) callCtx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), g.opts.RequestTimeout)
}

// WriteError writes err as a typed error response: a *Error as it is, a
// keel error with its code and status, Temporal out of reach as 503, and
// anything else as 500 (logged by the gateway, not shown).
func WriteError(w http.ResponseWriter, err error) {
	e := fromError(err)
	if rec, ok := w.(*recorder); ok && e.status >= 500 {
		rec.cause = err
	}
	writeError(w, e)
}

// ReadJSON decodes a request body of at most the gateway's body limit into
// v. The body must be sent as Content-Type: application/json (with at
// most charset=utf-8), else 415 unsupported_media_type: a web page on
// another origin can send a form or text/plain body without the
// browser asking first, never a JSON one (curl -d sends a form type: add
// -H 'Content-Type: application/json'); a request without a body is told
// that its body is empty (400). Unknown fields are refused, so a
// misspelt field is an error rather than silently ignored. Errors are
// *Error values for WriteError.
func ReadJSON(r *http.Request, v any) error {
	if err := requireJSON(r); err != nil {
		return err
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("more than one JSON value")
	}
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return apiError(http.StatusRequestEntityTooLarge, CodeBodyTooLarge,
			"request body is over "+strconv.FormatInt(tooLarge.Limit, 10)+" bytes")
	case errors.Is(err, io.EOF):
		return apiError(http.StatusBadRequest, CodeBadRequest, "request body is empty; send a JSON object")
	case err != nil:
		return apiError(http.StatusBadRequest, CodeBadRequest, "request body: "+err.Error())
	}
	return nil
}

// requireJSON refuses a body not declared application/json with 415. A
// request without a body passes, to be told that its body is empty.
func requireJSON(r *http.Request) error {
	if r.ContentLength == 0 {
		return nil
	}
	if e := httpguard.RequireJSON(r); e != nil {
		return apiError(e.Status, e.Code, e.Message)
	}
	return nil
}

// RunRequest is the body of POST /v1/sessions/{id}/runs. Its run
// configuration is api.RunConfig's but for model_timeout,
// heartbeat_timeout and compact_at, which tune the worker's activities
// and memory and so are its operator's, not a remote caller's (the Go
// client, a trusted caller, may set them).
type RunRequest struct {
	Prompt string `json:"prompt"`
	// Attachments are images and documents the prompt carries, each a
	// reference that POST /v1/attachments answered: at most
	// keel.MaxAttachments. A model that cannot read their kinds is
	// refused (400).
	Attachments []keel.Attachment `json:"attachments,omitempty"`
	// Model, Tools, System, MaxSteps, MaxTokens and Approvals override the
	// session's defaults for this run only (api.RunConfig); Tools []
	// means none.
	Model     string                  `json:"model,omitempty"`
	Tools     []string                `json:"tools,omitempty"`
	System    string                  `json:"system,omitempty"`
	MaxSteps  int                     `json:"max_steps,omitempty"`
	MaxTokens int                     `json:"max_tokens,omitempty"`
	Approvals map[string]api.Approval `json:"approvals,omitempty"`
	// Reasoning asks the model to reason first (keel.Reasoning); a model
	// that cannot take it is refused (400).
	Reasoning *keel.Reasoning `json:"reasoning,omitempty"`
	// Budget and SessionBudget bound what this run, and the session's
	// runs together, may spend (docs/contract.md §20); the worker's
	// ceilings apply on top, and a budget above one is refused (400).
	Budget        *api.Budget `json:"budget,omitempty"`
	SessionBudget *api.Budget `json:"session_budget,omitempty"`
	// OutputSchema is a JSON Schema the run's final answer must match
	// (docs/contract.md §21.1); the outcome then carries the parsed
	// answer. Bounded as api.CheckOutputSchema says.
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	// Agent runs the prompt as the worker's agent of that name
	// (docs/contract.md §21.2): its model, instructions, tools and output
	// schema, none of which the request may then set.
	Agent string `json:"agent,omitempty"`
	// Hooks names hooks the worker offers that run at the run's
	// execution boundaries (docs/contract.md §23), in order, after an
	// agent's own: at most api.MaxRunHooks, each named once. One the
	// worker does not offer is refused (400).
	Hooks []string `json:"hooks,omitempty"`
	// IfActive says what to do while a run is active: "reject" (default:
	// 409 run_active), "queue" (run it next) or "steer" (give it to the
	// active run as steering).
	IfActive string `json:"if_active,omitempty"`
	// SetDefault makes Model, Tools, System, MaxSteps, MaxTokens and Approvals the
	// session's defaults too, for this run and every later one
	// (docs/contract.md §11.6). It needs one of them, and cannot go with
	// if_active "steer".
	SetDefault bool `json:"set_default,omitempty"`
	// Once is the caller's key for this prompt (docs/contract.md §11.7):
	// a request repeated with the same key, by a caller that does not
	// know whether the first got through, starts nothing and answers the
	// first one's run with repeated set. 1 to 256 bytes.
	Once string `json:"once,omitempty"`
}

// checkMaxTokens refuses a negative max_tokens, which api.RunConfig's
// Merge would drop as unset: over HTTP it is a mistake to say so.
// (RunConfig.Validate runs in workflow code too, so it is not checked
// there, where a new refusal would change what a recorded run did.)
func checkMaxTokens(cfg *api.RunConfig) error {
	if cfg != nil && cfg.MaxTokens < 0 {
		return keel.Errorf(keel.CodeInvalidInput, "max_tokens cannot be negative")
	}
	return nil
}

// RunResponse is the answer of POST /v1/sessions/{id}/runs.
type RunResponse struct {
	RunID    string `json:"run_id"`
	Number   int    `json:"number"`
	Revision int64  `json:"revision"`
	BaseSeq  int64  `json:"base_seq"`
	Queued   bool   `json:"queued,omitempty"`
	// SteeringID is set when if_active "steer" gave the prompt to the
	// active run (RunID) as steering.
	SteeringID string `json:"steering_id,omitempty"`
	// Repeated says the request's once key was taken before: this is
	// the run the first request started, and nothing started now.
	Repeated bool `json:"repeated,omitempty"`
}

// Validate checks the request before any call and returns the send
// options it asks for. Checked here as well as in the session:
// update-with-start would create the session before its update is
// refused.
func (req RunRequest) Validate() ([]client.SendOption, error) {
	switch {
	case strings.TrimSpace(req.Prompt) == "":
		return nil, keel.Errorf(keel.CodeInvalidInput, "prompt must be 1 to %d bytes of text", api.MaxPromptBytes)
	case len(req.Prompt) > api.MaxPromptBytes:
		// The worker's default limit (api.Limits), refused before the
		// session would be created: 413, as the worker answers.
		return nil, keel.Errorf(keel.CodeTooLarge, "the prompt is %d bytes; the limit is %d", len(req.Prompt), api.MaxPromptBytes)
	}
	if err := keel.CheckAttachments(req.Attachments); err != nil {
		return nil, err
	}
	if len(req.Once) > api.MaxOnceBytes {
		return nil, keel.Errorf(keel.CodeInvalidInput, "once: a request's key must be 1 to %d bytes, got %d", api.MaxOnceBytes, len(req.Once))
	}
	if bytes.Equal(bytes.TrimSpace(req.OutputSchema), []byte("null")) {
		req.OutputSchema = nil
	}
	var opts []client.SendOption
	switch req.IfActive {
	case "", string(api.IfActiveReject):
	case string(api.IfActiveQueue):
		opts = append(opts, client.Queue())
	case "steer":
		opts = append(opts, client.OrSteer())
	default:
		return nil, keel.Errorf(keel.CodeInvalidInput, "if_active %s: use reject, queue or steer", quoteShort(req.IfActive))
	}
	cfg := api.RunConfig{Model: req.Model, Tools: req.Tools, System: req.System, MaxSteps: req.MaxSteps, MaxTokens: req.MaxTokens,
		Approvals: req.Approvals, Budget: req.Budget, SessionBudget: req.SessionBudget, OutputSchema: req.OutputSchema, Agent: req.Agent,
		Reasoning: req.Reasoning, Hooks: req.Hooks}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := checkMaxTokens(&cfg); err != nil {
		return nil, err
	}
	if req.Agent != "" && (req.Model != "" || req.System != "" || req.Tools != nil || len(req.OutputSchema) > 0) {
		return nil, keel.Errorf(keel.CodeInvalidInput, "agent %s defines its model, instructions, tools and output schema: send none of them with it", req.Agent)
	}
	hasConfig := req.Model != "" || req.Tools != nil || req.System != "" || req.MaxSteps != 0 || req.MaxTokens != 0 || req.Approvals != nil ||
		req.Budget != nil || req.SessionBudget != nil || len(req.OutputSchema) > 0 || req.Agent != "" || req.Reasoning != nil ||
		req.Hooks != nil
	if hasConfig {
		opts = append(opts, client.WithConfig(cfg))
	}
	if len(req.Attachments) > 0 {
		opts = append(opts, client.WithAttachments(req.Attachments...))
	}
	if req.SetDefault {
		switch {
		case !hasConfig:
			return nil, keel.Errorf(keel.CodeInvalidInput, "set_default needs model, tools, system, max_steps, approvals or a budget to make the session's default")
		case req.IfActive == "steer":
			return nil, keel.Errorf(keel.CodeInvalidInput, "set_default cannot go with if_active steer: steering has no run config")
		}
		opts = append(opts, client.SetDefault())
	}
	return opts, nil
}

func (g *Gateway) postRun(w http.ResponseWriter, r *http.Request, s *client.Session) {
	var req RunRequest
	if err := ReadJSON(r, &req); err != nil {
		WriteError(w, err)
		return
	}
	opts, err := req.Validate()
	if err != nil {
		WriteError(w, err)
		return
	}
	ctx, cancel := g.callCtx(r)
	defer cancel()
	var run *client.Run
	if req.Once != "" {
		run, err = s.SendOnce(ctx, req.Once, req.Prompt, opts...)
	} else {
		run, err = s.Send(ctx, req.Prompt, opts...)
	}
	if err != nil {
		WriteError(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, RunResponse{RunID: run.ID, Number: run.Number, Revision: run.Revision,
		BaseSeq: run.BaseSeq, Queued: run.Queued, SteeringID: run.SteeringID, Repeated: run.Repeated})
}

func (g *Gateway) getState(w http.ResponseWriter, r *http.Request, s *client.Session) {
	ctx, cancel := g.callCtx(r)
	defer cancel()
	st, err := s.State(ctx)
	if err != nil {
		WriteError(w, err)
		return
	}
	st.Parent = visibleOrigin(r, st.Parent)
	st.Delegated = visibleDelegation(r, st.Delegated)
	writeJSON(w, http.StatusOK, st)
}

func (g *Gateway) getHistory(w http.ResponseWriter, r *http.Request, s *client.Session) {
	offset, err := intParam(r, "offset", 0, 0)
	if err != nil {
		WriteError(w, err)
		return
	}
	limit, err := intParam(r, "limit", 0, 0)
	if err != nil {
		WriteError(w, err)
		return
	}
	ctx, cancel := g.callCtx(r)
	defer cancel()
	page, err := s.History(ctx, int(offset), int(limit))
	if err != nil {
		WriteError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}

// Event pages of GET /events.
const (
	DefaultEventsLimit = 100
	MaxEventsLimit     = api.DefaultEventsLimit
)

// EventsPage is the JSON answer of GET /v1/sessions/{id}/events.
type EventsPage struct {
	Events []keel.Envelope `json:"events"`
	// More says events after this page were there; read on with
	// after=NextAfter.
	More      bool  `json:"more"`
	NextAfter int64 `json:"next_after"`
}

func (g *Gateway) getEvents(w http.ResponseWriter, r *http.Request, s *client.Session) {
	if wantsStream(r) {
		g.streamEvents(w, r, s)
		return
	}
	after, err := oneCursor("after", r.URL.Query()["after"])
	if err != nil {
		WriteError(w, err)
		return
	}
	after = max(after, 0)
	limit, err := intParam(r, "limit", DefaultEventsLimit, 1)
	if err != nil {
		WriteError(w, err)
		return
	}
	ctx, cancel := g.callCtx(r)
	defer cancel()
	evs, more, err := s.EventsPage(ctx, after, int(min(limit, MaxEventsLimit)))
	if err != nil {
		WriteError(w, err)
		return
	}
	page := EventsPage{Events: make([]keel.Envelope, 0, len(evs)), More: more, NextAfter: after}
	for _, env := range evs {
		page.Events = append(page.Events, visibleEvent(r, env))
	}
	if n := len(evs); n > 0 {
		page.NextAfter = evs[n-1].Seq
	}
	writeJSON(w, http.StatusOK, page)
}

// wantsStream reports whether the request asks for Server-Sent Events.
func wantsStream(r *http.Request) bool {
	for _, a := range r.Header.Values("Accept") {
		if strings.Contains(a, "text/event-stream") {
			return true
		}
	}
	return false
}

// intParam reads a non-negative integer query parameter of at least least,
// def when absent.
func intParam(r *http.Request, name string, def, least int64) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < least {
		return 0, keel.Errorf(keel.CodeInvalidInput, "%s=%q: want an integer from %d", name, v, least)
	}
	return n, nil
}
