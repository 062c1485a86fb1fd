package mcp

import (
	"context"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/provider"
	"github.com/keelrun/keel/server/tool"
)

// sample answers a server's sampling request with the run's model
// (tool.Sample, through keel's provider layer; the run counts the usage).
// Like an elicitation it is tied to the one call in flight.
func (s *server) sample(_ context.Context, req *sdk.CreateMessageRequest) (*sdk.CreateMessageResult, error) {
	c := s.soleCall()
	if c == nil {
		return nil, errNotOneCall
	}
	p := req.Params
	sreq := tool.SampleRequest{System: p.SystemPrompt, MaxTokens: int(p.MaxTokens)}
	for _, m := range p.Messages {
		if m == nil || m.Content == nil {
			continue
		}
		text := contentText(m.Content)
		if m.Role == "assistant" {
			sreq.Messages = append(sreq.Messages, keel.Message{Role: keel.RoleAssistant, Content: text})
		} else {
			sreq.Messages = append(sreq.Messages, keel.UserMessage(text))
		}
	}
	// The SDK cancels the request's context when the server gives up; the
	// call's context ends with the call.
	res, err := tool.Sample(c.ctx, sreq)
	switch {
	case errors.Is(err, tool.ErrSamplingRefused):
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "sampling is refused for this call"}
	case err != nil:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the model failed: " + err.Error()}
	}
	stop := "endTurn"
	if res.Finish == string(provider.FinishLength) {
		stop = "maxTokens"
	}
	return &sdk.CreateMessageResult{Content: &sdk.TextContent{Text: res.Text}, Model: res.Model, Role: "assistant",
		StopReason: stop}, nil
}
