package gateway_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/keelrun/keel/server/gateway"
)

// Two teams' keys, each limited to its prefix.
const (
	teamAKey = "team-a-key-0123456789abcdef0123456789"
	teamBKey = "team-b-key-0123456789abcdef0123456789"
)

func teamKeys() []gateway.APIKey {
	return []gateway.APIKey{{Key: teamAKey, Prefix: "team-a-"}, {Key: teamBKey, Prefix: "team-b-"},
		{Key: "reader-key-0123456789abcdef0123456789", Scope: gateway.ScopeRead}}
}

// What a hostile caller sends the A2A endpoint is refused, typed, with
// nothing changed: malformed JSON-RPC, unknown methods and agents, a
// body over the limit, parts keel does not take, and another key's
// sessions and tasks, named as a contextId or a task ID, which answer as
// ones that do not exist.
func TestA2ARefusesHostileRequests(t *testing.T) {
	shared.book.Add(t, "typed", `{"turns":[{"text":["{\"n\": 1}"]},{"text":["{\"n\": 2}"]},{"text":["{\"n\": 3}"]}]}`)
	s := startGateway(t, gateway.Options{Agents: interopAgents(), Keys: teamKeys(), MaxBodyBytes: 8 << 10})
	ctx := testCtx(t)
	cb, _ := a2aClient(t, ctx, s, "/v1/a2a/typed", teamBKey)
	res, err := cb.SendMessage(ctx, userText("count"))
	if err != nil {
		t.Fatal(err)
	}
	bTask := res.(*a2a.Task)
	if !strings.HasPrefix(bTask.ContextID, "team-b-a2a-") {
		t.Fatalf("team B's task in session %s", bTask.ContextID)
	}
	send := func(extra string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"message/send","params":{"message":{"kind":"message","messageId":"m1","role":"user",` +
			`"parts":[{"kind":"text","text":"hi"}]` + extra + `}}}`
	}
	for _, c := range []struct {
		name, path, body string
		status, code     int
		data             string
	}{
		{"not JSON", "/v1/a2a/typed", `{"jsonrpc":`, 200, gateway.RPCParseError, "invalid_input"},
		{"a batch", "/v1/a2a/typed", `[{"jsonrpc":"2.0","id":1,"method":"tasks/get"}]`, 200, gateway.RPCParseError, "invalid_input"},
		{"no id", "/v1/a2a/typed", `{"jsonrpc":"2.0","method":"tasks/get","params":{"id":"x/run-1"}}`, 200, gateway.RPCInvalidRequest, "invalid_input"},
		{"an object id", "/v1/a2a/typed", `{"jsonrpc":"2.0","id":{"a":1},"method":"tasks/get"}`, 200, gateway.RPCInvalidRequest, "invalid_input"},
		{"version 1", "/v1/a2a/typed", `{"jsonrpc":"1.0","id":1,"method":"tasks/get"}`, 200, gateway.RPCInvalidRequest, "invalid_input"},
		{"unknown method", "/v1/a2a/typed", `{"jsonrpc":"2.0","id":1,"method":"tasks/delete","params":{}}`, 200, gateway.RPCMethodNotFound, "method_not_found"},
		{"push", "/v1/a2a/typed", `{"jsonrpc":"2.0","id":1,"method":"tasks/pushNotificationConfig/set","params":{}}`, 200, gateway.RPCPushNotSupported, "push_not_supported"},
		{"malformed params", "/v1/a2a/typed", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":[1]}`, 200, gateway.RPCInvalidParams, "invalid_input"},
		{"a file part", "/v1/a2a/typed", strings.Replace(send(""), `{"kind":"text","text":"hi"}`, `{"kind":"file","file":{"uri":"file:///etc/passwd"}}`, 1), 200, gateway.RPCInvalidParams, "content_type_not_supported"},
		{"an agent's message", "/v1/a2a/typed", strings.Replace(send(""), `"role":"user"`, `"role":"agent"`, 1), 200, gateway.RPCInvalidParams, "invalid_input"},
		{"too large", "/v1/a2a/typed", send(`,"metadata":{"pad":"` + strings.Repeat("x", 9<<10) + `"}`), 413, gateway.RPCInvalidRequest, gateway.CodeBodyTooLarge},
		{"another key's context", "/v1/a2a/typed", send(`,"contextId":"` + bTask.ContextID + `"`), 200, gateway.RPCTaskNotFound, "not_found"},
		{"a new context outside the prefix", "/v1/a2a/typed", send(`,"contextId":"team-b-made-up"`), 200, gateway.RPCTaskNotFound, "not_found"},
		{"another key's task", "/v1/a2a/typed", send(`,"taskId":"` + string(bTask.ID) + `"`), 200, gateway.RPCTaskNotFound, "not_found"},
		{"a forged task ID", "/v1/a2a/typed", send(`,"taskId":"team-a-x/run-01"`), 200, gateway.RPCTaskNotFound, "not_found"},
		{"get another key's task", "/v1/a2a/typed", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"` + string(bTask.ID) + `"}}`, 200, gateway.RPCTaskNotFound, "not_found"},
		{"cancel another key's task", "/v1/a2a", `{"jsonrpc":"2.0","id":1,"method":"tasks/cancel","params":{"id":"` + string(bTask.ID) + `"}}`, 200, gateway.RPCTaskNotFound, "not_found"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := postRPC(t, s, c.path, teamAKey, c.body)
			if r.status != c.status || r.Error == nil || r.Error.Code != c.code || r.Error.Data.Code != c.data || r.Result != nil {
				t.Errorf("status %d, error %+v, result %s", r.status, r.Error, r.Result)
			}
		})
	}
	// Nothing changed: team B's session ran once, and no session was made
	// for the forged context.
	st := s.callWith(t, http.MethodGet, "/v1/sessions/"+bTask.ContextID, nil, map[string]string{"Authorization": bearer(teamBKey)}).must(t, http.StatusOK)
	if st.body["runs"] != 1.0 {
		t.Errorf("team B's session after the attacks: %s", st.raw)
	}
	s.callWith(t, http.MethodGet, "/v1/sessions/team-b-made-up", nil, map[string]string{"Authorization": bearer(teamBKey)}).must(t, http.StatusNotFound)
	// Unknown agents, keys, and scopes are refused before any method.
	if r := postRPC(t, s, "/v1/a2a/nobody", teamAKey, send("")); r.status != http.StatusNotFound {
		t.Errorf("unknown agent: %d", r.status)
	}
	if r := postRPC(t, s, "/v1/a2a/typed", "", send("")); r.status != http.StatusUnauthorized {
		t.Errorf("no key: %d", r.status)
	}
	if r := s.callWith(t, http.MethodPost, "/v1/a2a/typed", map[string]any{"jsonrpc": "2.0"}, map[string]string{"Authorization": bearer("reader-key-0123456789abcdef0123456789")}); r.status != http.StatusForbidden {
		t.Errorf("read-only key: %d", r.status)
	}
	s.callWith(t, http.MethodGet, "/v1/a2a/nobody/.well-known/agent-card.json", nil, map[string]string{"Authorization": bearer(teamAKey)}).must(t, http.StatusNotFound)
	// A key's own new task is under its prefix.
	ca, _ := a2aClient(t, ctx, s, "/v1/a2a/typed", teamAKey)
	res, err = ca.SendMessage(ctx, userText("count"))
	if err != nil || !strings.HasPrefix(res.(*a2a.Task).ContextID, "team-a-a2a-") {
		t.Errorf("team A's task: %+v %v", res, err)
	}
}

// The MCP endpoint: a call's session is under the key's prefix; another
// key cannot use an MCP session it did not open; unknown tools and
// malformed arguments are refused, typed, before any run.
func TestMCPRefusesHostileRequests(t *testing.T) {
	shared.book.Add(t, "typed", `{"turns":[{"text":["{\"n\": 1}"]}]}`)
	s := startGateway(t, gateway.Options{Agents: interopAgents(), Keys: teamKeys()})
	ctx := testCtx(t)
	cs := mcpConnect(t, ctx, s, teamAKey, nil)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "agent__typed", Arguments: map[string]any{"task": "count"}})
	if err != nil || res.IsError || !strings.HasPrefix(res.Meta["keel/session_id"].(string), "team-a-mcp-") {
		t.Fatalf("team A's call: %+v %v", res, err)
	}
	for _, c := range []struct {
		name string
		args any
		tool string
		code int64
	}{
		{"no task", map[string]any{}, "agent__typed", gateway.RPCInvalidParams},
		{"an empty task", map[string]any{"task": " "}, "agent__typed", gateway.RPCInvalidParams},
		{"an extra argument", map[string]any{"task": "x", "model": "other"}, "agent__typed", gateway.RPCInvalidParams},
		{"unknown tool", map[string]any{"task": "x"}, "agent__nobody", gateway.RPCInvalidParams},
	} {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		var je *jsonrpc.Error
		if !errors.As(err, &je) || je.Code != c.code {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	// Team B takes team A's MCP session ID: not found; without a key,
	// unauthorized.
	for key, want := range map[string]int{teamBKey: http.StatusNotFound, "": http.StatusUnauthorized} {
		r := s.callWith(t, http.MethodPost, "/v1/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
			map[string]string{"Mcp-Session-Id": cs.ID(), "Authorization": bearer(key), "Accept": "application/json, text/event-stream"})
		if r.status != want {
			t.Errorf("key %q with team A's MCP session: %d %s", key, r.status, r.raw)
		}
	}
}

// What an MCP client sends back (a Last-Event-ID, an elicitation's
// answer) names a run; one naming a session another key holds, or not
// written by the gateway, is refused before anything is followed or
// answered. Malformed messages are refused, typed.
func TestMCPRefusesForgedResumesAndAnswers(t *testing.T) {
	s := startGateway(t, gateway.Options{Agents: interopAgents(), Keys: teamKeys()})
	ctx := testCtx(t)
	session := mcpConnect(t, ctx, s, teamAKey, nil).ID()
	b64 := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	headers := func(extra ...string) map[string]string {
		h := map[string]string{"Authorization": bearer(teamAKey), "Mcp-Session-Id": session, "Accept": "application/json, text/event-stream"}
		for i := 0; i+1 < len(extra); i += 2 {
			h[extra[i]] = extra[i+1]
		}
		return h
	}
	for _, c := range []struct {
		name, last string
		status     int
	}{
		{"no Last-Event-ID", "", http.StatusMethodNotAllowed},
		{"not base64", "%%%", http.StatusBadRequest},
		{"not a cursor", b64([]int{1}), http.StatusBadRequest},
		{"another key's session", b64(map[string]any{"s": "team-b-mcp-0123456789abcdef0123", "r": 1, "q": 2, "e": 0, "n": 0}), http.StatusBadRequest},
		{"a session MCP did not make", b64(map[string]any{"s": "team-a-other", "r": 1, "q": 2, "e": 0, "n": 0}), http.StatusBadRequest},
		{"a request ID that is an object", b64(map[string]any{"s": "team-a-mcp-0123456789abcdef0123", "r": 1, "q": map[string]any{}, "e": 0, "n": 0}), http.StatusBadRequest},
		{"no run", b64(map[string]any{"s": "team-a-mcp-0123456789abcdef0123", "r": 0, "q": 2, "e": 0, "n": 0}), http.StatusBadRequest},
		{"too long", strings.Repeat("A", 4000), http.StatusBadRequest},
	} {
		r := s.callWith(t, http.MethodGet, "/v1/mcp", nil, headers("Last-Event-ID", c.last))
		if r.status != c.status {
			t.Errorf("%s: %d %s", c.name, r.status, r.raw)
		}
	}
	if n := gateway.Followers(s.gw); n != 0 {
		t.Errorf("%d followers after refused resumes", n)
	}
	answer := func(s string) string {
		id, _ := json.Marshal("keel-elicit." + s)
		return `{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"action":"accept","content":{"answer":"x"}}}`
	}
	for _, c := range []struct{ name, body string }{
		{"another key's question", answer(b64(map[string]any{"s": "team-b-mcp-0123456789abcdef0123", "r": 1, "h": "q1"}))},
		{"a question MCP did not ask", answer(b64(map[string]any{"s": "team-a-other", "r": 1, "h": "q1"}))},
		{"no question", answer("%%%")},
		{"a question of no run", answer(b64(map[string]any{"s": "team-a-mcp-0123456789abcdef0123", "r": 1, "h": "q1"}))},
	} {
		r := s.callWith(t, http.MethodPost, "/v1/mcp", c.body, headers())
		if r.status == http.StatusAccepted || r.status < 400 {
			t.Errorf("%s: %d %s", c.name, r.status, r.raw)
		}
	}
	for _, c := range []struct {
		name, body string
		headers    map[string]string
		status     int
		code       float64
	}{
		{"a batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, headers(), http.StatusBadRequest, gateway.RPCParseError},
		{"not 2.0", `{"jsonrpc":"1.0","id":1,"method":"ping"}`, headers(), http.StatusBadRequest, gateway.RPCInvalidRequest},
		{"an object ID", `{"jsonrpc":"2.0","id":{},"method":"ping"}`, headers(), http.StatusBadRequest, gateway.RPCInvalidRequest},
		{"a call before initialize", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
			map[string]string{"Authorization": bearer(teamAKey)}, http.StatusBadRequest, gateway.RPCInvalidRequest},
		{"an unknown method", `{"jsonrpc":"2.0","id":1,"method":"resources/list"}`, headers(), http.StatusOK, gateway.RPCMethodNotFound},
		{"a progress token that is an object", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"agent__typed",` +
			`"arguments":{"task":"x"},"_meta":{"progressToken":{"a":1}}}}`, headers(), http.StatusOK, gateway.RPCInvalidParams},
	} {
		r := s.callWith(t, http.MethodPost, "/v1/mcp", c.body, c.headers)
		fault, _ := r.body["error"].(map[string]any)
		if r.status != c.status || fault == nil || fault["code"] != c.code {
			t.Errorf("%s: %d %s", c.name, r.status, r.raw)
		}
	}
	r := s.callWith(t, http.MethodPost, "/v1/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, headers("Mcp-Protocol-Version", "1999-01-01"))
	if r.status != http.StatusBadRequest {
		t.Errorf("an unknown protocol version: %d %s", r.status, r.raw)
	}
	// A session ID with its flag flipped (to claim elicitation) is no
	// session.
	flipped := session[:32] + map[byte]string{'0': "1", '1': "0"}[session[32]] + session[33:]
	r = s.callWith(t, http.MethodPost, "/v1/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, headers("Mcp-Session-Id", flipped))
	if r.status != http.StatusNotFound {
		t.Errorf("a flipped session ID: %d %s", r.status, r.raw)
	}
}
