package gateway

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/keelrun/keel"
)

// The A2A endpoints (docs/interop.md, "A2A"): an agent card and a
// JSON-RPC endpoint (A2A 0.3's methods) for the worker's default agent
// at /v1/a2a, and for each agent of the catalogue at /v1/a2a/{agent}.
// A task is a keel run; its contextId is the run's session and its ID
// the run's ID (SESSION/run-N), so a task needs no state of the
// gateway's and outlives it.
const (
	// A2AProtocolVersion is the A2A version the endpoints speak.
	A2AProtocolVersion = "0.3.0"
	// a2aCardPath follows an agent's endpoint: its card.
	a2aCardPath = "/.well-known/agent-card.json"
	// a2aSessionMark follows the key's prefix in the sessions new tasks
	// make.
	a2aSessionMark = "a2a-"
)

// A2A's JSON-RPC methods.
const (
	a2aSend        = "message/send"
	a2aStream      = "message/stream"
	a2aGet         = "tasks/get"
	a2aCancel      = "tasks/cancel"
	a2aResubscribe = "tasks/resubscribe"
)

// routeA2A mounts the cards and the JSON-RPC endpoints. Cards name no
// session; the JSON-RPC endpoints check the sessions their messages name
// against the key's prefix.
func (g *Gateway) routeA2A() {
	g.handle(Route{Method: http.MethodGet, Path: "/v1/a2a" + a2aCardPath, noSession: true}, g.a2aCard(nil))
	g.handle(Route{Method: http.MethodPost, Path: "/v1/a2a", sessions: true}, g.a2aEndpoint(nil))
	g.handle(Route{Method: http.MethodGet, Path: "/v1/a2a/{agent}" + a2aCardPath, noSession: true}, g.a2aNamed(g.a2aCard))
	g.handle(Route{Method: http.MethodPost, Path: "/v1/a2a/{agent}", sessions: true}, g.a2aNamed(g.a2aEndpoint))
}

// a2aNamed serves a named agent's route: an agent the catalogue does not
// hold is 404 not_found.
func (g *Gateway) a2aNamed(h func(*Agent) http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, err := g.agents.agent(r.PathValue("agent"))
		if err != nil {
			WriteError(w, err)
			return
		}
		h(a).ServeHTTP(w, r)
	})
}

// a2aCard serves agent a's card (nil: the default agent's).
func (g *Gateway) a2aCard(a *Agent) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		// The Host passed the guard's check: it names this gateway.
		base := scheme + "://" + r.Host + "/v1/a2a"
		card := a2a.AgentCard{
			Name: "keel", Description: "keel's default agent: the worker's model and tools, as a durable run.",
			URL: base, Version: "v1", ProtocolVersion: A2AProtocolVersion, PreferredTransport: a2a.TransportProtocolJSONRPC,
			Capabilities:       a2a.AgentCapabilities{Streaming: true},
			DefaultInputModes:  []string{"text/plain", "application/json"},
			DefaultOutputModes: []string{"text/plain", "application/json"},
			Skills:             []a2a.AgentSkill{{ID: "run", Name: "run", Description: "Runs the task as a keel run.", Tags: []string{"keel"}}},
		}
		if a != nil {
			card.Name, card.URL = a.Name, base+"/"+a.Name
			card.Description = a.Description
			if card.Description == "" {
				card.Description = "keel's agent " + a.Name + "."
			}
			card.Skills = []a2a.AgentSkill{{ID: a.Name, Name: a.Name, Description: card.Description, Tags: []string{"keel"}}}
		}
		if g.keys.enabled() {
			card.SecuritySchemes = a2a.NamedSecuritySchemes{"bearer": a2a.HTTPAuthSecurityScheme{Scheme: "Bearer"}}
			card.Security = []a2a.SecurityRequirements{{"bearer": a2a.SecuritySchemeScopes{}}}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(card)
	})
}

// rpcRequest is a JSON-RPC request as the endpoint reads it.
type rpcRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// rpcResponse is a JSON-RPC response: a result or an error.
type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcFault       `json:"error,omitempty"`
}

// a2aEndpoint serves agent a's JSON-RPC endpoint (nil: the default
// agent's).
func (g *Gateway) a2aEndpoint(a *Agent) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, status, fault := readRPC(r)
		if fault != nil {
			writeRPC(w, status, rpcResponse{ID: req.ID, Error: fault})
			return
		}
		t := &a2aCall{g: g, r: r, agent: a, id: req.ID}
		switch req.Method {
		case a2aStream, a2aResubscribe:
			t.stream(w, req)
			return
		}
		result, err := t.call(req)
		if err != nil {
			writeRPC(w, http.StatusOK, rpcResponse{ID: req.ID, Error: toRPCFault(err)})
			return
		}
		writeRPC(w, http.StatusOK, rpcResponse{ID: req.ID, Result: result})
	})
}

// readRPC reads one JSON-RPC request: a body of JSON (Content-Type
// application/json) within the gateway's limit, version 2.0, an ID that
// is a string or a number, and a method. Batches are refused.
func readRPC(r *http.Request) (rpcRequest, int, *rpcFault) {
	var req rpcRequest
	if err := requireJSON(r); err != nil {
		e := fromError(err)
		return req, e.status, newRPCFault(RPCInvalidRequest, e.Code, "", false, e.Message)
	}
	body, err := io.ReadAll(r.Body)
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return req, http.StatusRequestEntityTooLarge, newRPCFault(RPCInvalidRequest, CodeBodyTooLarge, string(keel.CodeTooLarge), false,
			"request body is over "+strconv.FormatInt(tooLarge.Limit, 10)+" bytes")
	case err != nil:
		return req, http.StatusBadRequest, newRPCFault(RPCParseError, CodeBadRequest, "", false, "the request body could not be read")
	}
	if err := json.Unmarshal(body, &req); err != nil {
		req.ID = nil
		return req, http.StatusOK, newRPCFault(RPCParseError, CodeBadRequest, "", false, "the body is not a JSON-RPC request object")
	}
	if !validRPCID(req.ID) {
		req.ID = nil
		return req, http.StatusOK, newRPCFault(RPCInvalidRequest, CodeBadRequest, "", false, "a request needs an id: a string or a number")
	}
	if req.JSONRPC != "2.0" || req.Method == "" {
		return req, http.StatusOK, newRPCFault(RPCInvalidRequest, CodeBadRequest, "", false, `want "jsonrpc": "2.0" and a method`)
	}
	return req, http.StatusOK, nil
}

// validRPCID reports whether id is a JSON string or number: an ID the
// response may echo without echoing anything else the caller sent.
func validRPCID(id json.RawMessage) bool {
	if len(id) == 0 || len(id) > 256 {
		return false
	}
	var v any
	if json.Unmarshal(id, &v) != nil {
		return false
	}
	switch v.(type) {
	case string, float64:
		return true
	}
	return false
}

// writeRPC writes a JSON-RPC response.
func writeRPC(w http.ResponseWriter, status int, resp rpcResponse) {
	resp.JSONRPC = "2.0"
	if resp.ID == nil {
		resp.ID = json.RawMessage("null")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(resp)
}
