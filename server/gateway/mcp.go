package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/live"
)

// The MCP endpoint (docs/interop.md, "MCP"): a streamable-HTTP MCP server
// at /v1/mcp whose tools are the worker's agents, agent__NAME, each call
// a keel run of the agent in a new session.
const (
	// MCPToolPrefix starts every tool's name, as keel's own delegation
	// tools do.
	MCPToolPrefix = "agent__"
	// mcpSessionMark follows the key's prefix in the sessions MCP calls
	// make.
	mcpSessionMark = "mcp-"
	// mcpIdleTimeout closes an MCP session no request reached for this
	// long; a call in progress holds its request open.
	mcpIdleTimeout = 30 * time.Minute
	// mcpCancelTimeout bounds the cancel a call sends its run when the
	// client cancels the call.
	mcpCancelTimeout = 30 * time.Second
)

// mcpTaskSchema is every tool's input, as keel's delegation tools take it.
var mcpTaskSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"task":{"type":"string","minLength":1,"description":"What the agent is to do, complete in itself."}},` +
	`"required":["task"],"additionalProperties":false}`)

// newMCPHandler builds the streamable-HTTP handler. The gateway's guard
// already checked Host, Origin, the key and the body's size, so the
// SDK's own localhost check is off and its body limit is the gateway's.
func (g *Gateway) newMCPHandler() http.Handler {
	return mcp.NewStreamableHTTPHandler(g.mcpServer, &mcp.StreamableHTTPOptions{
		SessionTimeout:             mcpIdleTimeout,
		DisableLocalhostProtection: true,
		MaxRequestBodyBytes:        g.opts.MaxBodyBytes,
	})
}

// serveMCP serves /v1/mcp: a request naming an MCP session must carry the
// key that opened it (another key's session answers 404, as an unknown
// one does), and each request is an event stream of the gateway's, under
// its limits.
func (g *Gateway) serveMCP(w http.ResponseWriter, r *http.Request) {
	if id := r.Header.Get("Mcp-Session-Id"); id != "" && !g.ownsMCPSession(id, requestKey(r)) {
		writeError(w, apiError(http.StatusNotFound, string(snake(keel.CodeNotFound)), "MCP session not found"))
		return
	}
	ctx, done, err := g.OpenStream(r)
	if err != nil {
		WriteError(w, err)
		return
	}
	defer done()
	g.interop.mcp.ServeHTTP(w, r.WithContext(ctx))
}

// mcpServer is the MCP server of one MCP session, made when a client
// initializes one: its tools run under the initializing key's prefix.
func (g *Gateway) mcpServer(r *http.Request) *mcp.Server {
	k := requestKey(r)
	s := mcp.NewServer(&mcp.Implementation{Name: "keel", Version: "v1"}, &mcp.ServerOptions{
		GetSessionID: func() string { return g.mcpSessionID(k) },
		Instructions: "Each tool runs one of keel's agents as a durable run in a session of its own.",
	})
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
		s.AddTool(t, g.mcpCall(keyPrefix(k), a))
	}
	return s
}

// mcpCall is the handler of agent a's tool for a key of prefix prefix.
func (g *Gateway) mcpCall(prefix string, a *Agent) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		task, err := mcpTask(req.Params.Arguments)
		if err != nil {
			return nil, wireFault(err)
		}
		if err := g.followers.acquire(); err != nil {
			return nil, wireFault(err)
		}
		defer g.followers.release()
		id, err := newSessionID(prefix, mcpSessionMark)
		if err != nil {
			return nil, wireFault(err)
		}
		cctx, cancel := context.WithTimeout(ctx, g.opts.RequestTimeout)
		run, err := g.c.Session(id).Send(cctx, task, client.WithConfig(api.RunConfig{Agent: a.Name}))
		cancel()
		if err != nil {
			return nil, wireFault(err)
		}
		return g.followMCP(ctx, req, run, a)
	}
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

// followMCP follows the call's run to its end: progress notifications
// from its events, elicitation for its host input, its answer as the
// result. The call's context ending while the gateway runs is the
// client's cancel (notifications/cancelled, or the end of its MCP
// session): the run is cancelled cooperatively. The gateway closing
// leaves the run running.
func (g *Gateway) followMCP(ctx context.Context, req *mcp.CallToolRequest, run *client.Run, a *Agent) (*mcp.CallToolResult, error) {
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	defer context.AfterFunc(g.ctx, stop)()
	evs := startPump(fctx, run.Events)
	defer evs.stop()
	p := mcpProgress{req: req, meta: mcpMeta(run)}
	// The first notification names the run, so a client can reach it
	// through keel's own API too.
	p.note(fctx, "run "+run.ID+" started")
	for {
		select {
		case it, ok := <-evs.ch:
			var lag *live.LaggedError
			switch {
			case !ok:
				return g.mcpGone(ctx, run)
			case errors.As(it.err, &lag):
				continue
			case it.err != nil:
				if fctx.Err() != nil {
					return g.mcpGone(ctx, run)
				}
				return nil, wireFault(it.err)
			case it.env.RunID != run.ID:
				continue
			}
			res, done, err := g.mcpEvent(fctx, &p, run, it.env, a)
			if err != nil || done {
				return res, err
			}
		case <-fctx.Done():
			return g.mcpGone(ctx, run)
		}
	}
}

// mcpGone ends a call whose context ended: the client's cancel cancels
// the run; the gateway closing does not.
func (g *Gateway) mcpGone(ctx context.Context, run *client.Run) (*mcp.CallToolResult, error) {
	if g.ctx.Err() == nil && ctx.Err() != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), mcpCancelTimeout)
		defer cancel()
		if err := run.Cancel(cctx); err != nil {
			g.log.Warn("MCP call: cancel the run")
		}
	}
	return nil, wireFault(keel.Errorf(keel.CodeCancelled, "the call ended before run %s did", run.ID))
}

// mcpEvent handles one event of the call's run: done with the result at
// its terminal event.
func (g *Gateway) mcpEvent(ctx context.Context, p *mcpProgress, run *client.Run, env keel.Envelope, a *Agent) (*mcp.CallToolResult, bool, error) {
	ev, err := env.Event()
	if err != nil {
		return nil, false, nil // an event type this gateway does not know: no progress to report
	}
	if env.Path != "" {
		// A delegated child's event: its host input is the run's to
		// answer; the rest is its parent's progress.
		if q, ok := ev.(keel.HostInputRequested); ok {
			return nil, false, g.mcpElicit(ctx, p.req, run, q)
		}
		p.note(ctx, env.Path+": "+progressText(ev))
		return nil, false, nil
	}
	switch e := ev.(type) {
	case keel.HostInputRequested:
		return nil, false, g.mcpElicit(ctx, p.req, run, e)
	case keel.RunCompleted:
		res := mcpAnswer(e, a)
		res.Meta = p.meta
		return res, true, nil
	case keel.RunFailed:
		f := newRPCFault(RPCInternalError, snake(e.Code), string(e.Code), e.Retryable, e.Message)
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: string(e.Code) + ": " + e.Message}},
			Meta: mcp.Meta{"keel": json.RawMessage(f.Data), mcpMetaSession: run.Session().ID(), mcpMetaRun: run.ID}}, true, nil
	case keel.RunCancelled:
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "keel.Cancelled: the run was cancelled"}},
			Meta: p.meta}, true, nil
	}
	if text := progressText(ev); text != "" {
		p.note(ctx, text)
	}
	return nil, false, nil
}

// mcpAnswer is a completed run's result: its text, and its answer as
// structured content when the agent's schema is an object's.
func mcpAnswer(e keel.RunCompleted, a *Agent) *mcp.CallToolResult {
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: e.Text}}}
	if len(e.Answer) > 0 && objectSchema(a.OutputSchema) {
		res.StructuredContent = e.Answer
	}
	return res
}

// mcpProgress sends a call's progress notifications, when the call asked
// for them (a progress token).
type mcpProgress struct {
	req  *mcp.CallToolRequest
	meta mcp.Meta
	n    float64
}

// The _meta keys that name a call's keel session and run, on its
// progress notifications and its result.
const (
	mcpMetaSession = "keel/session_id"
	mcpMetaRun     = "keel/run_id"
)

func mcpMeta(run *client.Run) mcp.Meta {
	return mcp.Meta{mcpMetaSession: run.Session().ID(), mcpMetaRun: run.ID}
}

func (p *mcpProgress) note(ctx context.Context, msg string) {
	tok := p.req.Params.GetProgressToken()
	if tok == nil || msg == "" {
		return
	}
	p.n++
	// A notification the client does not take is lost, not fatal: the
	// result still comes.
	_ = p.req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: p.n, Message: msg,
		Meta: p.meta})
}

// progressText is an event as a progress message: text as it streams,
// tool activity and steps in words; "" for what is not progress.
func progressText(ev keel.Event) string {
	switch e := ev.(type) {
	case keel.TextDelta:
		return e.Text
	case keel.StepStarted:
		return fmt.Sprintf("step %d", e.Step)
	case keel.ToolStarted:
		return "tool " + e.Name + " started"
	case keel.ToolFinished:
		return "tool " + e.Name + " " + string(e.Status)
	case keel.AgentStarted:
		return "agent " + e.Agent + " started"
	case keel.AgentFinished:
		return "agent " + e.Agent + " finished"
	}
	return ""
}

// wireFault is err as the SDK sends a JSON-RPC error.
func wireFault(err error) error {
	f := toRPCFault(err)
	return &jsonrpc.Error{Code: f.Code, Message: f.Message, Data: f.Data}
}
