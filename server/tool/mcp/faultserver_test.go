package mcp_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// faultServerEnv makes the test binary an MCP server over stdio (see
// TestMain): a server keel did not start in-process, that can crash.
const faultServerEnv = "KEEL_MCP_FAULT_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(faultServerEnv) == "1" {
		s := newFaultServer(nil)
		if err := s.Run(context.Background(), &sdk.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, "fault server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type slowArgs struct {
	Seconds float64 `json:"seconds"`
}

type stepsArgs struct {
	N int `json:"n"`
}

type askArgs struct {
	Topic string `json:"topic"`
}

// faultServer's hooks let an in-process test see what the server saw.
type faultHooks struct {
	// slowCancelled receives the time the slow tool saw its context end.
	slowCancelled chan time.Time
	// slowStarted receives once per slow call started.
	slowStarted chan struct{}
}

// newFaultServer returns an MCP server with tools for the fault cases:
// slow (runs until cancelled, reporting progress), crash (the process
// exits mid-call), pid (which process answers), fail (an isError result)
// and ask (an elicitation).
func newFaultServer(h *faultHooks) *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "keel-fault", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "slow", Description: "Runs for seconds, or until cancelled."},
		func(ctx context.Context, req *sdk.CallToolRequest, args slowArgs) (*sdk.CallToolResult, any, error) {
			if h != nil && h.slowStarted != nil {
				h.slowStarted <- struct{}{}
			}
			if tok := req.Params.GetProgressToken(); tok != nil {
				_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Total: 2, Message: "started"})
			}
			select {
			case <-time.After(time.Duration(args.Seconds * float64(time.Second))):
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "slept"}}}, nil, nil
			case <-ctx.Done():
				if h != nil && h.slowCancelled != nil {
					h.slowCancelled <- time.Now()
				}
				return nil, nil, ctx.Err()
			}
		})
	sdk.AddTool(s, &sdk.Tool{Name: "steps", Description: "Reports progress for each step, then returns at once."},
		func(ctx context.Context, req *sdk.CallToolRequest, args stepsArgs) (*sdk.CallToolResult, any, error) {
			for i := 1; i <= args.N; i++ {
				_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(),
					Progress: float64(i), Total: float64(args.N)})
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "done"}}}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "big", Description: "Answers with n bytes of text."},
		func(_ context.Context, _ *sdk.CallToolRequest, args stepsArgs) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strings.Repeat("b", args.N)}}}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "crash", Description: "Exits the server process mid-call."},
		func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			os.Exit(3)
			return nil, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "pid", Description: "The server's process ID."},
		func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprint(os.Getpid())}}}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "fail", Description: "Fails."},
		func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "disk on fire"}}}, nil, nil
		})
	s.AddTool(&sdk.Tool{Name: "refuse", Description: "Answers with a JSON-RPC error.",
		InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return nil, &jsonrpc.Error{Code: -32001, Message: "quota exceeded"}
		})
	sdk.AddTool(s, &sdk.Tool{Name: "ask", Description: "Asks the user for a colour."},
		func(ctx context.Context, req *sdk.CallToolRequest, args askArgs) (*sdk.CallToolResult, any, error) {
			res, err := req.Session.Elicit(ctx, &sdk.ElicitParams{
				Message: "Favourite colour for " + args.Topic + "?",
				RequestedSchema: map[string]any{"type": "object",
					"properties": map[string]any{"colour": map[string]any{"type": "string", "enum": []string{"red", "blue"}}},
					"required":   []string{"colour"}},
			})
			if err != nil {
				return nil, nil, err
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf("%s: %v", res.Action, res.Content["colour"])}}}, nil, nil
		})
	return s
}

// serveFault serves s over streamable HTTP on a local port, requiring the
// header X-Token: want when want is set.
func serveFault(t *testing.T, s *sdk.Server, want string) string {
	t.Helper()
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if want != "" && r.Header.Get("X-Token") != want {
			http.Error(w, "bad token", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
