package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/keelrun/keel/server/gateway"
)

// The MCP endpoint lists one tool a worker agent, agent__NAME, taking
// {"task": string}, with the agent's output schema where it has one.
func TestMCPToolsAreTheAgents(t *testing.T) {
	s := startGateway(t, gateway.Options{Agents: interopAgents()})
	ctx := testCtx(t)
	cs := mcpConnect(t, ctx, s, "", nil)
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
		in, _ := json.Marshal(tl.InputSchema)
		if !strings.Contains(string(in), `"task"`) {
			t.Errorf("%s input schema %s", tl.Name, in)
		}
		out, _ := json.Marshal(tl.OutputSchema)
		if (tl.Name == "agent__typed") != (tl.OutputSchema != nil) {
			t.Errorf("%s output schema %s", tl.Name, out)
		}
	}
	if got := strings.Join(names, ","); got != "agent__asker,agent__planner,agent__researcher,agent__typed" {
		t.Errorf("tools %s", got)
	}
}

// A call is a keel run of the agent in a new session: progress
// notifications carry its steps and text as they stream (the first one
// names the session and run), and the result is its answer, structured
// where the agent has a schema.
func TestMCPCallRunsTheAgent(t *testing.T) {
	shared.book.Add(t, "typed", `{"chunk_delay":"5ms","turns":[{"text":["{\"n\":", " 42}"]}]}`)
	s := startGateway(t, gateway.Options{Agents: interopAgents()})
	ctx := testCtx(t)
	var mu sync.Mutex
	var notes []*mcp.ProgressNotificationParams
	cs := mcpConnect(t, ctx, s, "", &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		mu.Lock()
		notes = append(notes, r.Params)
		mu.Unlock()
	}})
	p := &mcp.CallToolParams{Name: "agent__typed", Arguments: map[string]any{"task": "count"}}
	p.SetProgressToken("tok-1")
	res, err := cs.CallTool(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		t.Fatalf("result is an error: %v", res.Content)
	}
	got, _ := json.Marshal(res.StructuredContent)
	if string(got) != `{"n":42}` {
		t.Errorf("structured content %s", got)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, "42") {
		t.Errorf("text %q", text)
	}
	session, _ := res.Meta["keel/session_id"].(string)
	if !strings.HasPrefix(session, "mcp-") {
		t.Fatalf("result meta %v", res.Meta)
	}
	mu.Lock()
	defer mu.Unlock()
	var msgs []string
	last := 0.0
	for _, n := range notes {
		if n.ProgressToken != "tok-1" || n.Progress <= last || n.Meta["keel/session_id"] != session {
			t.Errorf("notification %+v", n)
		}
		last = n.Progress
		msgs = append(msgs, n.Message)
	}
	all := strings.Join(msgs, "|")
	if !strings.HasPrefix(all, "run "+session+"/run-1 started") || !strings.Contains(all, "step 1") || !strings.Contains(all, " 42}") {
		t.Errorf("progress messages %q", all)
	}
	// The session is keel's like any other.
	r := s.call(t, http.MethodGet, "/v1/sessions/"+session, nil).must(t, http.StatusOK)
	if r.body["state"] != "completed" {
		t.Errorf("session state %s", r.raw)
	}
}

// Host input reaches an MCP client as an elicitation; its answer is the
// tool's result and the run completes. A client without elicitation
// gets a typed error, and the run is cancelled.
func TestMCPElicitsHostInput(t *testing.T) {
	shared.book.Add(t, "asker", `{"turns":[
	  {"tool_calls":[{"id":"q1","name":"ask_user","arguments":{"question":"Which colour?","schema":{"type":"string"}}}]},
	  {"text":["Noted."]}]}`)
	s := startGateway(t, gateway.Options{Agents: interopAgents()})
	ctx := testCtx(t)
	var asked string
	cs := mcpConnect(t, ctx, s, "", &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked = r.Params.Message
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "green"}}, nil
	}})
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "agent__asker", Arguments: map[string]any{"task": "pick"}})
	if err != nil {
		t.Fatal(err)
	}
	if asked != "Which colour?" || res.IsError || res.Content[0].(*mcp.TextContent).Text != "Noted." {
		t.Fatalf("asked %q, result %+v", asked, res)
	}
	session := res.Meta["keel/session_id"].(string)
	h := s.call(t, http.MethodGet, "/v1/sessions/"+session+"/history", nil).must(t, http.StatusOK)
	if !strings.Contains(string(h.raw), "green") {
		t.Errorf("history without the answer: %s", h.raw)
	}

	// No elicitation: typed, and nothing left waiting.
	plain := mcpConnect(t, ctx, s, "", nil)
	_, err = plain.CallTool(ctx, &mcp.CallToolParams{Name: "agent__asker", Arguments: map[string]any{"task": "pick"}})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != gateway.RPCHostInputUnsupported {
		t.Fatalf("call without elicitation: %v", err)
	}
}

// mcpGatedCall is an MCP call of the researcher whose run waits at a
// gate that never opens.
type mcpGatedCall struct {
	s       *stack
	ctx     context.Context
	client  *mcp.ClientSession
	session string             // the run's keel session
	cancel  context.CancelFunc // cancels the call (the client's cancel)
	done    chan error         // the call's error, once it returns
}

// startMCPGatedCall calls the researcher, its run held at gate, on a new
// gateway with a progress token; it returns once the call's progress says
// the gate tool started.
func startMCPGatedCall(t *testing.T, gate string, token any) mcpGatedCall {
	t.Helper()
	shared.book.Add(t, "researcher", `{"turns":[
	  {"tool_calls":[{"id":"g","name":"gate","arguments":{"key":"`+gate+`"}}]},
	  {"text":["unreachable"]}]}`)
	c := mcpGatedCall{s: startGateway(t, gateway.Options{Agents: interopAgents()}), ctx: testCtx(t), done: make(chan error, 1)}
	started := make(chan string, 16)
	c.client = mcpConnect(t, c.ctx, c.s, "", &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		if strings.HasPrefix(r.Params.Message, "tool gate started") {
			started <- r.Params.Meta["keel/session_id"].(string)
		}
	}})
	var cctx context.Context
	cctx, c.cancel = context.WithCancel(c.ctx)
	cs, done := c.client, c.done
	go func() {
		p := &mcp.CallToolParams{Name: "agent__researcher", Arguments: map[string]any{"task": "wait"}}
		p.SetProgressToken(token)
		_, err := cs.CallTool(cctx, p)
		done <- err
	}()
	select {
	case c.session = <-started:
	case <-c.ctx.Done():
		t.Fatal("no tool.started progress")
	}
	return c
}

// The client's cancel (notifications/cancelled) is keel's cooperative
// cancel of the run.
func TestMCPCancelCancelsTheRun(t *testing.T) {
	call := startMCPGatedCall(t, "mcp-cancel-never", 7)
	call.cancel()
	<-call.done
	waitForCancelled(t, call)
}

// waitForCancelled waits until the call's session is idle after a
// cancelled run.
func waitForCancelled(t *testing.T, call mcpGatedCall) {
	t.Helper()
	waitFor(t, call.ctx, func() bool {
		r := call.s.call(t, http.MethodGet, "/v1/sessions/"+call.session, nil).must(t, http.StatusOK)
		last, _ := r.body["last_outcome"].(map[string]any)
		return r.body["state"] == "idle" && last != nil && last["status"] == "cancelled"
	})
}

// Ending the MCP session (the client's DELETE) cancels its calls' runs.
func TestMCPEndingTheSessionCancelsItsCalls(t *testing.T) {
	call := startMCPGatedCall(t, "mcp-delete-never", "d")
	// A raw DELETE while the call waits: the Go SDK's Close waits for
	// calls in flight first, and then cancels them itself.
	call.s.callWith(t, http.MethodDelete, "/v1/mcp", nil,
		map[string]string{"Mcp-Session-Id": call.client.ID()}).must(t, http.StatusNoContent)
	waitForCancelled(t, call)
	<-call.done
}
