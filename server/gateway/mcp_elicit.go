package gateway

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/client"
)

// mcpElicit puts a run's host-input request to the MCP client as an
// elicitation and delivers the accepted answer (docs/contract.md §6).
// A client that declared no elicitation cannot be asked: the run is
// cancelled and the call fails with RPCHostInputUnsupported. A declined
// or dismissed question cancels the run too, and the call reports that.
func (g *Gateway) mcpElicit(ctx context.Context, req *mcp.CallToolRequest, run *client.Run, q keel.HostInputRequested) error {
	ip := req.Session.InitializeParams()
	if ip == nil || ip.Capabilities == nil || ip.Capabilities.Elicitation == nil {
		g.cancelRun(ctx, run)
		return wireFault(newRPCFault(RPCHostInputUnsupported, "host_input_unsupported", "", false,
			"the agent asked a question ("+q.RequestID+") and this MCP client takes no elicitation; the run was cancelled"))
	}
	schema, wrapped := elicitSchema(q.Schema)
	res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: q.Prompt, RequestedSchema: schema})
	if err != nil {
		if ctx.Err() != nil {
			return nil // the call's end is handled by its follower
		}
		g.cancelRun(ctx, run)
		return wireFault(keel.Errorf(keel.CodeInvalidAnswer, "the MCP client's answer to %s: %v; the run was cancelled", q.RequestID, err))
	}
	if res.Action != "accept" {
		// The terminal event (run.cancelled) ends the call.
		g.cancelRun(ctx, run)
		return nil
	}
	var answer any = res.Content
	if wrapped {
		answer = res.Content["answer"]
		if s, ok := answer.(string); ok && len(q.Schema) > 0 && !primitiveSchema(q.Schema) {
			// A structured answer travels as JSON text in a form's one
			// field.
			answer = json.RawMessage(s)
			if !json.Valid([]byte(s)) {
				return wireFault(keel.Errorf(keel.CodeInvalidAnswer, "the answer to %s is not JSON", q.RequestID))
			}
		}
	}
	cctx, cancel := context.WithTimeout(ctx, g.opts.RequestTimeout)
	defer cancel()
	if err := run.Respond(cctx, q.RequestID, answer); err != nil {
		return wireFault(err)
	}
	return nil
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
