package mcp_test

import (
	"context"
	"fmt"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/keelrun/keel/server/tool"
	"github.com/keelrun/keel/server/tool/mcp"
)

// Every attempt of one tool call carries the call's idempotency key in
// the request's _meta, so a server applies the call's effects once when
// Temporal runs it again (a worker that died mid-call, or a live worker
// whose heartbeats came too late; TestClusterUnderFaults saw both).
func TestCallCarriesIdempotencyKey(t *testing.T) {
	s := sdk.NewServer(&sdk.Implementation{Name: "keys", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "key", Description: "Answers the idempotency key it was called with."},
		func(_ context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			key := fmt.Sprint(req.Params.Meta[mcp.IdempotencyKeyMeta])
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: key}}}, nil, nil
		})
	reg, _ := connect(t, mcp.Options{}, mcp.ServerConfig{Name: "keys", URL: serveFault(t, s, "")})
	for attempt := 1; attempt <= 2; attempt++ {
		ctx := tool.WithCall(context.Background(), tool.CallInfo{SessionID: "s", RunID: "s/run-1", ToolCallID: "c1",
			IdempotencyKey: "s/run-1/c1", Attempt: attempt}, nil, func(string) {})
		res, err := call(t, ctx, reg, "mcp__keys__key", `{}`)
		if err != nil {
			t.Fatal(err)
		}
		if res.Output != "s/run-1/c1" {
			t.Errorf("attempt %d: the server saw idempotency key %q, want s/run-1/c1", attempt, res.Output)
		}
	}
}
