package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/tool"
)

// IdempotencyKeyMeta is the key in a tools/call request's _meta whose
// value is the same on every attempt of one tool call (the run's ID and
// the call's, tool.CallInfo.IdempotencyKey): a server with side effects
// applies them once a key.
const IdempotencyKeyMeta = "keel/idempotency_key"

// remoteTool is one tool of an MCP server, as registered in keel's
// registry: the model calls it by its keel name, like any other tool, so
// approval policies keyed by name apply to it.
type remoteTool struct {
	srv    *server
	remote string // the server's name for it

	mu    sync.Mutex
	spec  keel.ToolSpec
	check json.RawMessage
}

var _ tool.Timeouter = (*remoteTool)(nil)

func (t *remoteTool) update(spec keel.ToolSpec, check json.RawMessage) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.spec, t.check = spec, check
}

// Spec returns the tool's name (mcp__<server>__<tool>), description and
// the server's input schema.
func (t *remoteTool) Spec() keel.ToolSpec {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.spec
}

// Timeout is the server's configured call timeout (0: tool.DefaultTimeout).
func (t *remoteTool) Timeout() time.Duration { return t.srv.cfg.Timeout }

// Call checks the arguments against the server's schema and calls the
// tool on the server.
func (t *remoteTool) Call(ctx context.Context, args json.RawMessage) (tool.Result, error) {
	t.mu.Lock()
	name, check := t.spec.Name, t.check
	t.mu.Unlock()
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage(`{}`)
	}
	if err := tool.ValidateJSON(check, args); err != nil {
		var verr *tool.InvalidValueError
		problems := []string{err.Error()}
		if errors.As(err, &verr) {
			problems = verr.Problems
		}
		return (&tool.ArgumentError{Tool: name, Problems: problems}).Result(), nil
	}
	return t.srv.call(ctx, t.remote, args)
}

// call is one tool call in flight: where its progress and elicitations go.
type call struct {
	ctx    context.Context // the runner's, with the call's identity and answers
	cancel context.CancelFunc

	mu        sync.Mutex
	questions int             // elicitations so far in this run of the call
	need      *tool.NeedInput // set when an elicitation waits for the host
	// Progress notifications read off the connection and published (see
	// progress.go); drained is signalled as handled catches up.
	received, handled int
	drained           chan struct{}
}

// call runs tool name on the server. Failures the model should see (the
// server's errors, a server that exited) are error results; a question
// for the host is a *tool.NeedInput; cancellation returns ctx's error after
// the SDK sent notifications/cancelled to the server.
func (s *server) call(ctx context.Context, name string, args json.RawMessage) (tool.Result, error) {
	cs, err := s.sessionFor(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return tool.Result{}, ctx.Err()
		}
		return tool.Result{IsError: true, Output: fmt.Sprintf("MCP server %q is not available: %v", s.cfg.Name, err)}, nil
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c := &call{ctx: ctx, cancel: cancel, drained: make(chan struct{}, 1)}
	s.mu.Lock()
	s.seq++
	token := "keel-" + strconv.FormatInt(s.seq, 10)
	s.calls[token] = c
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.calls, token)
		s.mu.Unlock()
	}()

	params := &sdk.CallToolParams{Name: name, Arguments: args}
	params.SetProgressToken(token)
	if key := tool.Info(ctx).IdempotencyKey; key != "" {
		// Every attempt of one call carries the same key, so a server
		// can apply a call's effects once even when Temporal runs it
		// again: after its worker died, or beside itself after a live
		// worker's heartbeats came too late.
		params.Meta[IdempotencyKeyMeta] = key
	}
	res, err := cs.CallTool(cctx, params)
	if err == nil {
		c.drain()
	}
	c.mu.Lock()
	need := c.need
	c.mu.Unlock()
	var rpcErr *jsonrpc.Error
	switch {
	case need != nil:
		return tool.Result{}, need
	case ctx.Err() != nil:
		return tool.Result{}, ctx.Err()
	case errors.As(err, &rpcErr):
		return tool.Result{IsError: true,
			Output: fmt.Sprintf("MCP server %q refused the call: %s (JSON-RPC error %d)", s.cfg.Name, rpcErr.Message, rpcErr.Code)}, nil
	case err != nil && s.oversize.Load() != nil:
		// The server sent more than it may: the connection is dropped,
		// and the next call starts afresh.
		s.drop(cs)
		return tool.Result{IsError: true, Output: s.oversize.Load().Error()}, nil
	case err != nil:
		// The connection failed under the call (a stdio server exited, an
		// HTTP server went away): the next call starts afresh.
		s.drop(cs)
		return tool.Result{IsError: true,
			Output: fmt.Sprintf("MCP server %q failed during the call (%v); the next call starts or reaches it again, "+
				"but whether this call had effects is unknown", s.cfg.Name, err)}, nil
	}
	return resultOf(res), nil
}

// soleCall returns the one call in flight, or nil when there is none or
// several: a server's request to the client names no call, so keel ties it
// to the only one it can be part of.
func (s *server) soleCall() *call {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.calls) != 1 {
		return nil
	}
	for _, only := range s.calls {
		return only
	}
	return nil
}

// errNotOneCall refuses a request that cannot be tied to a call.
var errNotOneCall = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
	Message: "keel ties an elicitation or a sampling request to the one call in flight, and this server has none or several"}

// elicit turns a server's elicitation into a question for keel's host.
// The n-th elicitation of a call is question "elicitation-n". Without an
// answer yet, the call ends with a *tool.NeedInput (the server sees the
// elicitation fail and the call cancelled); once the host answered, the
// call runs again from the start and the server's same elicitation gets
// the answer.
func (s *server) elicit(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
	c := s.soleCall()
	if c == nil {
		return nil, errNotOneCall
	}
	q, err := question(c, req.Params)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	answer, err := tool.Ask(c.ctx, q)
	var need *tool.NeedInput
	if errors.As(err, &need) {
		c.mu.Lock()
		c.need = need
		c.mu.Unlock()
		c.cancel()
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
			Message: "keel asked its host; the call will be made again with the answer"}
	}
	if err != nil {
		return nil, err
	}
	if req.Params.Mode == "url" {
		var done bool
		if json.Unmarshal(answer, &done) == nil && done {
			return &sdk.ElicitResult{Action: "accept"}, nil
		}
		return &sdk.ElicitResult{Action: "decline"}, nil
	}
	var content map[string]any
	if err := json.Unmarshal(answer, &content); err != nil {
		return &sdk.ElicitResult{Action: "decline"}, nil
	}
	return &sdk.ElicitResult{Action: "accept", Content: content}, nil
}

// question is the host-input question for an elicitation: a form's schema
// as the answer's schema (the run validates the answer against
// it), or, for a URL, a yes-or-no "done?".
func question(c *call, p *sdk.ElicitParams) (tool.Question, error) {
	c.mu.Lock()
	c.questions++
	id := "elicitation-" + strconv.Itoa(c.questions)
	c.mu.Unlock()
	if p.Mode == "url" {
		return tool.Question{ID: id, Prompt: p.Message + "\nOpen " + p.URL + " and answer true once done, false to decline.",
			Schema: json.RawMessage(`{"type":"boolean"}`)}, nil
	}
	schema, err := json.Marshal(p.RequestedSchema)
	if err != nil {
		return tool.Question{}, fmt.Errorf("requested schema: %w", err)
	}
	if string(schema) == "null" {
		schema = nil
	} else if err := tool.CheckSchema(schema); err != nil {
		return tool.Question{}, err
	}
	return tool.Question{ID: id, Prompt: p.Message, Schema: schema}, nil
}
