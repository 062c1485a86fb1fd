package gateway

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
)

const (
	// mcpCancelTimeout bounds the cancel a call sends its run.
	mcpCancelTimeout = 30 * time.Second
	// mcpCallMemory is how long a call whose client went away can still
	// be cancelled through this gateway process.
	mcpCallMemory = 5 * time.Minute
)

// mcpCursor is how far a call's stream got, and what the stream needs to
// go on: it is each event's ID (base64url of its JSON), so a client that
// reconnects with Last-Event-ID resumes the call on any gateway process.
// It holds nothing the client may not see: its run's session is checked
// against the key again on resumption.
type mcpCursor struct {
	Session string          `json:"s"`
	Run     int             `json:"r"`
	Request json.RawMessage `json:"q"`
	Token   json.RawMessage `json:"t,omitempty"`
	// Seq is the last durable event the stream sent anything for;
	// Progress the last progress notification's number.
	Seq      int64 `json:"e"`
	Progress int   `json:"n"`
}

// maxMCPEventID bounds a Last-Event-ID: a cursor's session, request ID
// and progress token are bounded (256 bytes each at most).
const maxMCPEventID = 2048

func (c *mcpCursor) id() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

// readMCPCursor reads a Last-Event-ID the gateway wrote.
func readMCPCursor(id string) (mcpCursor, bool) {
	var c mcpCursor
	if len(id) > maxMCPEventID {
		return c, false
	}
	b, err := base64.RawURLEncoding.DecodeString(id)
	if err != nil || json.Unmarshal(b, &c) != nil {
		return c, false
	}
	ok := keel.ValidateSessionID(c.Session) == nil && c.Run > 0 && validRPCID(c.Request) &&
		(len(c.Token) == 0 || validRPCID(c.Token)) && c.Seq >= 0 && c.Progress >= 0
	return c, ok
}

// call serves tools/call: the agent's run in a new session, followed on
// an event stream (progress, elicitations, then the result).
func (c *mcpConn) call(w http.ResponseWriter, msg mcpMessage) {
	fail := func(err error) { writeRPC(w, http.StatusOK, rpcResponse{ID: msg.ID, Error: toRPCFault(err)}) }
	// A limit keeps its HTTP status (429, 503), as A2A's streams do.
	atLimit := func(err error) { writeRPC(w, fromError(err).status, rpcResponse{ID: msg.ID, Error: toRPCFault(err)}) }
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Meta      struct {
			ProgressToken json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(msg.Params, &p); err != nil {
		fail(keel.Errorf(keel.CodeInvalidInput, "tools/call's params are malformed"))
		return
	}
	name, ok := strings.CutPrefix(p.Name, MCPToolPrefix)
	a, err := c.g.agents.agent(name)
	if !ok || err != nil {
		fail(keel.Errorf(keel.CodeInvalidInput, "no tool %q", clip(p.Name, 64)))
		return
	}
	task, err := mcpTask(p.Arguments)
	if err != nil {
		fail(err)
		return
	}
	if tok := p.Meta.ProgressToken; len(tok) > 0 && string(tok) != "null" && !validRPCID(tok) {
		fail(keel.Errorf(keel.CodeInvalidInput, "a progress token is a string or a number of at most 256 bytes"))
		return
	}
	ctx, done, err := c.g.OpenStream(c.r)
	if err != nil {
		atLimit(err)
		return
	}
	defer done()
	if err := c.g.followers.acquire(); err != nil {
		atLimit(err)
		return
	}
	defer c.g.followers.release()
	id, err := newSessionID(keyPrefix(requestKey(c.r)), mcpSessionMark)
	if err != nil {
		fail(err)
		return
	}
	sctx, cancel := context.WithTimeout(ctx, c.g.opts.RequestTimeout)
	run, err := c.g.c.Session(id).Send(sctx, task, client.WithConfig(api.RunConfig{Agent: a.Name}))
	cancel()
	if err != nil {
		fail(err)
		return
	}
	cur := mcpCursor{Session: id, Run: run.Number, Request: msg.ID}
	if string(p.Meta.ProgressToken) != "null" {
		cur.Token = p.Meta.ProgressToken
	}
	s := c.stream(w, run, cur)
	// A first event with an ID: the client can resume from here (MCP's
	// priming event); then a notification that names the run, so the
	// client can reach it through keel's own API too.
	if s.sw.Event(s.cur.id(), "", nil) != nil {
		return
	}
	s.note("run " + run.ID + " started")
	s.follow(ctx, run.Events)
}

// resume serves a GET with Last-Event-ID: the call's stream from where
// the client's last event left it, on this gateway or another.
func (c *mcpConn) resume(w http.ResponseWriter, last string) {
	cur, ok := readMCPCursor(last)
	run, mine := c.callRun(cur.Session, cur.Run)
	if !ok || !mine {
		writeError(w, apiError(http.StatusBadRequest, CodeBadRequest, "Last-Event-ID names no stream of this key's"))
		return
	}
	ctx, done, err := c.g.OpenStream(c.r)
	if err != nil {
		WriteError(w, err)
		return
	}
	defer done()
	if err := c.g.followers.acquire(); err != nil {
		WriteError(w, err)
		return
	}
	defer c.g.followers.release()
	s := c.stream(w, run, cur)
	s.follow(ctx, func(ctx context.Context) iter.Seq2[keel.Envelope, error] { return followFrom(ctx, run, cur.Seq) })
}

// callRun is the run of one of this key's calls: its session one the
// endpoint made under the key's prefix. false for any other.
func (c *mcpConn) callRun(session string, run int) (*client.Run, bool) {
	if keel.ValidateSessionID(session) != nil || run <= 0 || !allowsSession(c.r, session) || !strings.Contains(session, mcpSessionMark) {
		return nil, false
	}
	return c.g.c.Session(session).Run(run), true
}

// mcpStream is one call's event stream.
type mcpStream struct {
	c    *mcpConn
	sw   *SSEWriter
	run  *client.Run
	cur  mcpCursor
	meta map[string]any
	// call is the call's entry among the gateway's calls in flight,
	// which the client's cancel finds.
	call *mcpCall
	// over says the call's stream ended with the call: its response
	// sent, or its run cancelled by the client.
	over bool
}

func (c *mcpConn) stream(w http.ResponseWriter, run *client.Run, cur mcpCursor) *mcpStream {
	return &mcpStream{c: c, sw: NewSSEWriter(w, c.g.opts.WriteTimeout), run: run, cur: cur,
		meta: map[string]any{mcpMetaSession: cur.Session, mcpMetaRun: run.ID}}
}

// The _meta keys that name a call's keel session and run, on its
// progress notifications and its result.
const (
	mcpMetaSession = "keel/session_id"
	mcpMetaRun     = "keel/run_id"
)

// follow sends the run's events as the call's messages until its result.
// The client going away or the gateway closing leaves the run running:
// the client may resume, and only its cancel cancels the run.
func (s *mcpStream) follow(ctx context.Context, events func(context.Context) iter.Seq2[keel.Envelope, error]) {
	s.call = s.c.g.interop.calls.add(s.c.session, s.cur.Request, s.run)
	defer func() {
		if s.over {
			s.c.g.interop.calls.remove(s.call)
			return
		}
		// The client went away, and its cancel may come after: the
		// go-sdk client closes the stream, then sends it.
		time.AfterFunc(mcpCallMemory, func() { s.c.g.interop.calls.remove(s.call) })
	}()
	s.c.g.followRun(ctx, s.sw, s.run.ID, events, func(env keel.Envelope) bool {
		if env.Durable() {
			s.cur.Seq = env.Seq
		}
		return s.event(ctx, env)
	}, func(err error) { s.respond(rpcResponse{Error: toRPCFault(err)}) })
}

// event sends what one of the run's events says; false when the stream
// is over (its result sent, or the client gone).
func (s *mcpStream) event(ctx context.Context, env keel.Envelope) bool {
	ev, err := env.Event()
	if err != nil {
		return true // an event type this gateway does not know: no progress to report
	}
	if q, ok := ev.(keel.HostInputRequested); ok {
		// The run's question or a delegated child's: the run answers.
		return s.elicit(ctx, q)
	}
	if env.Path != "" {
		return s.note(env.Path + ": " + progressText(ev))
	}
	switch e := ev.(type) {
	case keel.RunCompleted:
		res := map[string]any{"content": []any{mcpText(e.Text)}, "_meta": s.meta}
		if len(e.Answer) > 0 && e.Answer[0] == '{' {
			res["structuredContent"] = e.Answer
		}
		return s.result(res)
	case keel.RunFailed:
		f := newRPCFault(RPCInternalError, snake(e.Code), string(e.Code), e.Retryable, e.Message)
		meta := map[string]any{"keel": f.Data, mcpMetaSession: s.cur.Session, mcpMetaRun: s.run.ID}
		return s.result(map[string]any{"isError": true, "content": []any{mcpText(string(e.Code) + ": " + e.Message)}, "_meta": meta})
	case keel.RunCancelled:
		if s.call.cancelled() {
			// The client cancelled the call: MCP sends no response.
			s.over = true
			return false
		}
		return s.result(map[string]any{"isError": true, "content": []any{mcpText("keel.Cancelled: the run was cancelled")}, "_meta": s.meta})
	}
	return s.note(progressText(ev))
}

func mcpText(text string) map[string]any { return map[string]any{"type": "text", "text": text} }

// result sends the call's result; the stream is over.
func (s *mcpStream) result(res map[string]any) bool {
	s.respond(rpcResponse{Result: res})
	return false
}

// respond sends the call's response.
func (s *mcpStream) respond(resp rpcResponse) {
	resp.JSONRPC, resp.ID = "2.0", s.cur.Request
	s.send(resp)
	s.over = true
}

// note sends a progress notification, when the call asked for them (a
// progress token) and there is something to say; false when the client
// is gone.
func (s *mcpStream) note(msg string) bool {
	if len(s.cur.Token) == 0 || msg == "" {
		return true
	}
	s.cur.Progress++
	return s.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/progress", "params": map[string]any{
		"progressToken": s.cur.Token, "progress": s.cur.Progress, "message": msg, "_meta": s.meta}})
}

// send writes one message, its ID the cursor after it.
func (s *mcpStream) send(msg any) bool {
	data, err := json.Marshal(msg)
	if err != nil {
		return false
	}
	return s.sw.Event(s.cur.id(), "message", data) == nil
}

// cancelled handles notifications/cancelled: the call's run is cancelled
// cooperatively, when this gateway process streams the call.
func (c *mcpConn) cancelled(params json.RawMessage) {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil || !validRPCID(p.RequestID) || c.session == "" {
		return
	}
	c.g.interop.calls.cancel(c.g, c.session, p.RequestID)
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

// mcpCalls are the calls this gateway process streams, by MCP session and
// request ID, for the client's cancel to find.
type mcpCalls struct {
	mu    sync.Mutex
	calls map[mcpCallKey][]*mcpCall
}

type mcpCallKey struct{ session, request string }

type mcpCall struct {
	key mcpCallKey
	run *client.Run
	// byClient says the client cancelled the call.
	byClient atomic.Bool
}

func (c *mcpCall) cancelled() bool { return c.byClient.Load() }

func (m *mcpCalls) add(session string, request json.RawMessage, run *client.Run) *mcpCall {
	c := &mcpCall{key: mcpCallKey{session, string(request)}, run: run}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.calls == nil {
		m.calls = map[mcpCallKey][]*mcpCall{}
	}
	m.calls[c.key] = append(m.calls[c.key], c)
	return c
}

func (m *mcpCalls) remove(c *mcpCall) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rest := slices.DeleteFunc(m.calls[c.key], func(o *mcpCall) bool { return o == c })
	if len(rest) == 0 {
		delete(m.calls, c.key)
		return
	}
	m.calls[c.key] = rest
}

// cancel cancels the runs of a session's calls of one request ID.
func (m *mcpCalls) cancel(g *Gateway, session string, request json.RawMessage) {
	m.mu.Lock()
	calls := slices.Clone(m.calls[mcpCallKey{session, string(request)}])
	m.mu.Unlock()
	for _, c := range calls {
		c.byClient.Store(true)
		g.cancelRun(context.Background(), c.run)
	}
}

// cancelSession cancels the runs of all a session's calls: the client
// ended its MCP session (DELETE).
func (m *mcpCalls) cancelSession(g *Gateway, session string) {
	m.mu.Lock()
	var calls []*mcpCall
	for k, cs := range m.calls {
		if k.session == session {
			calls = append(calls, cs...)
		}
	}
	m.mu.Unlock()
	for _, c := range calls {
		g.cancelRun(context.Background(), c.run)
	}
}
