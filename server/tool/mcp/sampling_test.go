package mcp_test

import (
	"context"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/keelrun/keel/server/tool"
	"github.com/keelrun/keel/server/tool/mcp"
)

// newSamplingServer returns an MCP server with one tool, ask_model: it
// says "no sampling capability" when keel did not advertise one, and
// otherwise asks keel's model and returns its answer.
func newSamplingServer() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "keel-sampling", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "ask_model", Description: "Asks the client's model."},
		func(ctx context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			if caps := req.Session.InitializeParams().Capabilities; caps == nil || caps.Sampling == nil {
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "no sampling capability"}}}, nil, nil
			}
			res, err := req.Session.CreateMessage(ctx, &sdk.CreateMessageParams{MaxTokens: 20,
				Messages: []*sdk.SamplingMessage{{Role: "user", Content: &sdk.TextContent{Text: "say hi"}}}})
			if err != nil {
				return nil, nil, err
			}
			text, _ := res.Content.(*sdk.TextContent)
			if text == nil {
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "not text"}}}, nil, nil
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "model said: " + text.Text}}}, nil, nil
		})
	return s
}

// Sampling is allowed per server: the server whose ServerConfig.Sampling
// is set is offered the capability and its request reaches the call's
// sampler (the run's model); a server beside it without the setting is
// not offered it.
func TestSamplingPerServer(t *testing.T) {
	reg, _ := connect(t, mcp.Options{},
		mcp.ServerConfig{Name: "trusted", URL: serveFault(t, newSamplingServer(), ""), Sampling: true},
		mcp.ServerConfig{Name: "other", URL: serveFault(t, newSamplingServer(), "")})
	sampled := 0
	ctx := tool.WithSampler(callCtx(context.Background(), nil, nil), func(_ context.Context, req tool.SampleRequest) (tool.SampleResult, error) {
		sampled++
		if req.MaxTokens != 20 || len(req.Messages) != 1 || req.Messages[0].Content != "say hi" {
			t.Errorf("sample request = %+v, want one message \"say hi\" and 20 max tokens", req)
		}
		return tool.SampleResult{Text: "hi", Model: "m1", Finish: "stop"}, nil
	})
	for _, tc := range []struct{ name, want string }{
		{"mcp__trusted__ask_model", "model said: hi"},
		{"mcp__other__ask_model", "no sampling capability"},
	} {
		res, err := call(t, ctx, reg, tc.name, `{}`)
		if err != nil || res.IsError || res.Output != tc.want {
			t.Errorf("%s: %+v, %v; want %q", tc.name, res, err, tc.want)
		}
	}
	if sampled != 1 {
		t.Errorf("the model was asked %d times, want once (by the trusted server only)", sampled)
	}
}
