package gateway

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
)

// The MCP endpoint (docs/interop.md, "MCP"): streamable HTTP at /v1/mcp,
// whose tools are the worker's agents, agent__NAME, each call a keel run
// of the agent in a new session. The gateway keeps nothing an MCP client
// needs back: session IDs are checked by their signature, a call's
// stream is resumed from its event ID (which names its run and how far
// the client got), and an elicitation's answer names the question it
// answers, so a call outlives the gateway process that started it.
const (
	// MCPToolPrefix starts every tool's name, as keel's own delegation
	// tools do.
	MCPToolPrefix = "agent__"
	// mcpSessionMark follows the key's prefix in the sessions MCP calls
	// make.
	mcpSessionMark = "mcp-"
)

// mcpVersions are the MCP versions the endpoint speaks, newest first.
var mcpVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26"}

// mcpTaskSchema is every tool's input, as keel's delegation tools take it.
var mcpTaskSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"task":{"type":"string","minLength":1,"description":"What the agent is to do, complete in itself."}},` +
	`"required":["task"],"additionalProperties":false}`)

// mcpMessage is a JSON-RPC message as the endpoint reads it: a request
// (method and id), a notification (method, no id) or a response (id, and
// result or error).
type mcpMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

// serveMCP serves /v1/mcp. A request naming an MCP session must carry the
// key that opened it: another key's session answers 404, as an unknown
// one does.
func (g *Gateway) serveMCP(w http.ResponseWriter, r *http.Request) {
	sid := r.Header.Get("Mcp-Session-Id")
	var elicits bool
	if sid != "" {
		var ok bool
		if elicits, ok = g.mcpSession(sid, requestKey(r)); !ok {
			writeError(w, apiError(http.StatusNotFound, string(snake(keel.CodeNotFound)), "MCP session not found"))
			return
		}
	}
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" && !slices.Contains(mcpVersions, v) {
		writeError(w, apiError(http.StatusBadRequest, CodeBadRequest, "unsupported MCP-Protocol-Version; the endpoint speaks "+strings.Join(mcpVersions, ", ")))
		return
	}
	if sid == "" && r.Method != http.MethodPost {
		writeError(w, apiError(http.StatusBadRequest, CodeBadRequest, r.Method+" needs an Mcp-Session-Id"))
		return
	}
	c := mcpConn{g: g, r: r, session: sid, elicits: elicits}
	switch r.Method {
	case http.MethodGet:
		last := r.Header.Get("Last-Event-ID")
		if last == "" {
			// No stream of server-initiated messages: every message
			// belongs to a call's stream.
			w.Header().Set("Allow", "POST, DELETE")
			writeError(w, apiError(http.StatusMethodNotAllowed, CodeBadRequest, "the MCP endpoint opens no stream without a Last-Event-ID"))
			return
		}
		c.resume(w, last)
	case http.MethodDelete:
		g.interop.calls.cancelSession(g, sid)
		w.WriteHeader(http.StatusNoContent)
	default:
		c.post(w)
	}
}

// mcpConn is one request of an MCP session (session "" before
// initialize; elicits says its client takes elicitation).
type mcpConn struct {
	g       *Gateway
	r       *http.Request
	session string
	elicits bool
}

// post handles one posted message: a request is answered (a call with an
// event stream, the rest with JSON), a notification or a response is
// accepted with 202. Batches are refused.
func (c *mcpConn) post(w http.ResponseWriter) {
	msg, fault := readMCPMessage(c.r)
	if fault != nil {
		writeRPC(w, http.StatusBadRequest, rpcResponse{Error: fault})
		return
	}
	switch {
	case msg.Method == "" && len(msg.ID) > 0:
		if err := c.answer(msg); err != nil {
			WriteError(w, err)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		return
	case len(msg.ID) == 0:
		if msg.Method == "notifications/cancelled" {
			c.cancelled(msg.Params)
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if msg.Method != "initialize" && c.session == "" {
		writeRPC(w, http.StatusBadRequest, rpcResponse{ID: msg.ID, Error: newRPCFault(RPCInvalidRequest, CodeBadRequest, "", false,
			"initialize first: "+msg.Method+" needs an Mcp-Session-Id")})
		return
	}
	var result any
	switch msg.Method {
	case "initialize":
		var err error
		if result, err = c.initialize(w, msg.Params); err != nil {
			writeRPC(w, http.StatusOK, rpcResponse{ID: msg.ID, Error: toRPCFault(err)})
			return
		}
	case "ping":
		result = struct{}{}
	case "tools/list":
		result = map[string]any{"tools": c.g.mcpTools()}
	case "tools/call":
		c.call(w, msg)
		return
	default:
		writeRPC(w, http.StatusOK, rpcResponse{ID: msg.ID, Error: newRPCFault(RPCMethodNotFound, CodeBadRequest, "", false,
			"the MCP endpoint has no method "+strconv.Quote(clip(msg.Method, 64)))})
		return
	}
	writeRPC(w, http.StatusOK, rpcResponse{ID: msg.ID, Result: result})
}

// readMCPMessage reads one JSON-RPC message within the gateway's body
// limit: version 2.0, an id (when there is one) that is a string or a
// number.
func readMCPMessage(r *http.Request) (mcpMessage, *rpcFault) {
	var msg mcpMessage
	if err := requireJSON(r); err != nil {
		e := fromError(err)
		return msg, newRPCFault(RPCInvalidRequest, e.Code, "", false, e.Message)
	}
	body, err := io.ReadAll(r.Body)
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return msg, newRPCFault(RPCInvalidRequest, CodeBodyTooLarge, string(keel.CodeTooLarge), false,
			"request body is over "+strconv.FormatInt(tooLarge.Limit, 10)+" bytes")
	case err != nil:
		return msg, newRPCFault(RPCParseError, CodeBadRequest, "", false, "the request body could not be read")
	}
	if err := json.Unmarshal(body, &msg); err != nil {
		return mcpMessage{}, newRPCFault(RPCParseError, CodeBadRequest, "", false, "the body is not one JSON-RPC message (batches are not taken)")
	}
	if len(msg.ID) > 0 && !validRPCID(msg.ID) {
		return mcpMessage{}, newRPCFault(RPCInvalidRequest, CodeBadRequest, "", false, "an id is a string or a number")
	}
	if msg.JSONRPC != "2.0" || (msg.Method == "" && len(msg.ID) == 0) {
		return msg, newRPCFault(RPCInvalidRequest, CodeBadRequest, "", false, `want "jsonrpc": "2.0" and a method or an id`)
	}
	return msg, nil
}

// initialize opens an MCP session: its ID, signed for the key, says
// whether the client takes elicitation.
func (c *mcpConn) initialize(w http.ResponseWriter, params json.RawMessage) (any, error) {
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
		Capabilities    struct {
			Elicitation json.RawMessage `json:"elicitation"`
		} `json:"capabilities"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, newRPCFault(RPCInvalidParams, CodeBadRequest, string(keel.CodeInvalidInput), false, "initialize's params are malformed")
	}
	version := mcpVersions[0]
	if slices.Contains(mcpVersions, p.ProtocolVersion) {
		version = p.ProtocolVersion
	}
	elicits := len(p.Capabilities.Elicitation) > 0 && string(p.Capabilities.Elicitation) != "null"
	w.Header().Set("Mcp-Session-Id", c.g.newMCPSession(requestKey(c.r), elicits))
	return map[string]any{
		"protocolVersion": version,
		"capabilities":    map[string]any{"tools": map[string]any{}},
		"serverInfo":      map[string]any{"name": "keel", "version": "v1"},
		"instructions":    "Each tool runs one of keel's agents as a durable run in a session of its own.",
	}, nil
}

// mcpTools lists the catalogue's agents as tools.
func (g *Gateway) mcpTools() []*mcp.Tool {
	tools := make([]*mcp.Tool, 0, len(g.agents.agents))
	for i := range g.agents.agents {
		a := &g.agents.agents[i]
		desc := a.Description
		if desc == "" {
			desc = "Runs keel's agent " + a.Name + "."
		}
		t := &mcp.Tool{Name: MCPToolPrefix + a.Name, Description: desc, InputSchema: mcpTaskSchema}
		if objectSchema(a.OutputSchema) {
			t.OutputSchema = a.OutputSchema
		}
		tools = append(tools, t)
	}
	return tools
}

// mcpTask reads a call's arguments: {"task": 1 to api.MaxPromptBytes
// bytes of text}.
func mcpTask(args json.RawMessage) (string, error) {
	var in struct {
		Task *string `json:"task"`
	}
	dec := json.NewDecoder(strings.NewReader(string(args)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil || in.Task == nil {
		return "", keel.Errorf(keel.CodeInvalidInput, `want arguments {"task": string}`)
	}
	if strings.TrimSpace(*in.Task) == "" || len(*in.Task) > api.MaxPromptBytes {
		return "", keel.Errorf(keel.CodeInvalidInput, "the task is 1 to %d bytes of text", api.MaxPromptBytes)
	}
	return *in.Task, nil
}

// An MCP session ID is 32 hex digits of randomness, a flag (1: the client
// takes elicitation) and a tag: an HMAC of both under the hash of the key
// that opened it, so any gateway holding that key checks it, and another
// key cannot use it even when it learns it.
const (
	mcpNonceLen = 32
	mcpIDLen    = mcpNonceLen + 1 + 32
)

// newMCPSession makes an MCP session ID for key k.
func (g *Gateway) newMCPSession(k *keyEntry, elicits bool) string {
	var b [mcpNonceLen / 2]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("gateway: no randomness: " + err.Error())
	}
	head := hex.EncodeToString(b[:]) + "0"
	if elicits {
		head = head[:mcpNonceLen] + "1"
	}
	return head + mcpTag(head, k)
}

// mcpSession checks an MCP session ID against key k, and says whether its
// client takes elicitation.
func (g *Gateway) mcpSession(id string, k *keyEntry) (elicits, ok bool) {
	if len(id) != mcpIDLen {
		return false, false
	}
	head := id[:mcpNonceLen+1]
	return head[mcpNonceLen] == '1', hmac.Equal([]byte(id[mcpNonceLen+1:]), []byte(mcpTag(head, k)))
}

// mcpTag signs an MCP session ID's head for key k. Without keys the
// gateway is open to all, and the tag only checks the ID's form.
func mcpTag(head string, k *keyEntry) string {
	var secret []byte
	if k != nil {
		secret = k.sum[:]
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("keel MCP session\x00" + head))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// clip cuts s to at most n bytes, for echoing what a caller sent.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
