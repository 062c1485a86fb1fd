package gateway

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/client"
)

// elicit puts a host-input request (the run's, or a delegated child's,
// which the run answers) to the MCP client as an elicitation (docs/contract.md
// §6). Its request ID names the question and how to read the answer, so
// the answer may reach any gateway process (answer). A client that
// declared no elicitation cannot be asked: the run is cancelled and the
// call fails with RPCHostInputUnsupported.
func (s *mcpStream) elicit(ctx context.Context, q keel.HostInputRequested) bool {
	if !s.c.elicits {
		s.c.g.cancelRun(ctx, s.run)
		s.respond(rpcResponse{Error: newRPCFault(RPCHostInputUnsupported, "host_input_unsupported", "", false,
			"the agent asked a question ("+clip(q.RequestID, 128)+") and this MCP client takes no elicitation; the run was cancelled")})
		return false
	}
	schema, wrapped := elicitSchema(q.Schema)
	e := mcpElicitation{Session: s.cur.Session, Run: s.run.Number, Request: q.RequestID, Wrapped: wrapped,
		JSON: wrapped && len(q.Schema) > 0 && !primitiveSchema(q.Schema)}
	b, _ := json.Marshal(e)
	return s.send(map[string]any{"jsonrpc": "2.0", "id": mcpElicitMark + base64.RawURLEncoding.EncodeToString(b),
		"method": "elicitation/create", "params": map[string]any{"message": q.Prompt, "requestedSchema": schema}})
}

// mcpElicitMark starts the ID of every elicitation the endpoint sends.
const mcpElicitMark = "keel-elicit."

// mcpElicitation is what an elicitation's ID says: the question, and
// whether the answer is a form's one field "answer" (Wrapped) holding
// JSON text (JSON).
type mcpElicitation struct {
	Session string `json:"s"`
	Run     int    `json:"r"`
	Request string `json:"h"`
	Wrapped bool   `json:"w,omitempty"`
	JSON    bool   `json:"j,omitempty"`
}

// answer delivers the client's response to an elicitation: an accepted
// answer is the run's (Respond); a declined or dismissed question, or an
// error, cancels the run, whose terminal event ends the call. An answer
// the run refuses as invalid cancels the run too.
func (c *mcpConn) answer(msg mcpMessage) error {
	var raw string
	var e mcpElicitation
	bad := keel.Errorf(keel.CodeUnknownRequest, "the response answers no question of this key's")
	if json.Unmarshal(msg.ID, &raw) != nil {
		return bad
	}
	enc, ok := strings.CutPrefix(raw, mcpElicitMark)
	b, err := base64.RawURLEncoding.DecodeString(enc)
	if !ok || err != nil || json.Unmarshal(b, &e) != nil || c.session == "" {
		return bad
	}
	run, ok := c.callRun(e.Session, e.Run)
	if !ok {
		return bad
	}
	ctx := c.r.Context()
	var res struct {
		Action  string         `json:"action"`
		Content map[string]any `json:"content"`
	}
	if len(msg.Result) == 0 || json.Unmarshal(msg.Result, &res) != nil || res.Action != "accept" {
		c.g.cancelRun(ctx, run)
		return nil
	}
	var answer any = res.Content
	if e.Wrapped {
		answer = res.Content["answer"]
		if s, ok := answer.(string); ok && e.JSON {
			// A structured answer travels as JSON text in a form's one
			// field.
			if !json.Valid([]byte(s)) {
				c.g.cancelRun(ctx, run)
				return keel.Errorf(keel.CodeInvalidAnswer, "the answer to %s is not JSON; the run was cancelled", e.Request)
			}
			answer = json.RawMessage(s)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, c.g.opts.RequestTimeout)
	defer cancel()
	err = run.Respond(cctx, e.Request, answer)
	if errors.Is(err, keel.ErrInvalidAnswer) {
		c.g.cancelRun(ctx, run)
	}
	return err
}

// cancelRun cancels run cooperatively; a failure is logged, as the call
// fails anyway.
func (g *Gateway) cancelRun(ctx context.Context, run *client.Run) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), mcpCancelTimeout)
	defer cancel()
	if err := run.Cancel(cctx); err != nil {
		g.log.Warn("interop: cancel the run")
	}
}

// elicitSchema turns a host-input schema into an elicitation form: an
// object of primitive fields goes as it is; anything else is one field
// "answer" (wrapped): the primitive itself, or a JSON text.
func elicitSchema(s json.RawMessage) (any, bool) {
	if formSchema(s) {
		return s, false
	}
	field := json.RawMessage(`{"type":"string","description":"Your answer"}`)
	if primitiveSchema(s) {
		field = s
	} else if len(s) > 0 {
		field = json.RawMessage(`{"type":"string","description":"Your answer as JSON"}`)
	}
	return map[string]any{"type": "object", "properties": map[string]any{"answer": field}, "required": []string{"answer"}}, true
}

// primitiveSchema reports whether s is a schema of one string, number,
// integer or boolean.
func primitiveSchema(s json.RawMessage) bool {
	var root struct {
		Type any `json:"type"`
	}
	if len(s) == 0 || json.Unmarshal(s, &root) != nil {
		return false
	}
	switch root.Type {
	case "string", "number", "integer", "boolean":
		return true
	}
	return false
}

// formSchema reports whether s is an object schema whose properties are
// all primitive: what an MCP elicitation form takes.
func formSchema(s json.RawMessage) bool {
	if !objectSchema(s) {
		return false
	}
	var root struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(s, &root) != nil || len(root.Properties) == 0 {
		return false
	}
	for _, p := range root.Properties {
		if !primitiveSchema(p) {
			return false
		}
	}
	return true
}
