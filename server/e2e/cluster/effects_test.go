package cluster_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The workload's tools, served to every keel worker by one MCP server in
// the test process (keel.yaml's mcp_servers.effects), so that what each
// call did is counted where the test reads it, whichever worker made it.
const (
	effectTool     = "mcp__effects__effect"
	slowEffectTool = "mcp__effects__slow_effect"
)

// effects counts each key's side effects. A call applies its effect only
// once it has finished its work and its caller is still there to receive
// the result, as a tool with a transaction would commit: a call whose
// worker died mid-call counts as aborted. A completed call of the same key
// run again is counted in applied twice, which the checks forbid.
type effects struct {
	mu      sync.Mutex
	applied map[string]int
	aborted map[string]int
}

type effectArgs struct {
	Key string `json:"key" jsonschema:"the call's identity, unique in the test"`
	// MS is how long the call works before it applies its effect.
	MS int `json:"ms,omitempty" jsonschema:"milliseconds of work"`
}

type effectResult struct {
	Applied int `json:"applied"`
}

// serveEffects starts the MCP server and returns its URL.
func serveEffects(t *testing.T) (*effects, string) {
	t.Helper()
	e := &effects{applied: map[string]int{}, aborted: map[string]int{}}
	s := sdk.NewServer(&sdk.Implementation{Name: "effects", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "effect", Description: "applies a side effect at once"}, e.call)
	sdk.AddTool(s, &sdk.Tool{Name: "slow_effect", Description: "works for ms, then applies a side effect"}, e.call)
	// Stateless: a worker killed and started again, or cut off and
	// reconnected, needs no MCP session from before.
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, &sdk.StreamableHTTPOptions{Stateless: true})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return e, srv.URL
}

func (e *effects) call(ctx context.Context, _ *sdk.CallToolRequest, in effectArgs) (*sdk.CallToolResult, effectResult, error) {
	select {
	case <-time.After(time.Duration(in.MS) * time.Millisecond):
	case <-ctx.Done():
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if ctx.Err() != nil {
		e.aborted[in.Key]++
		return nil, effectResult{}, ctx.Err()
	}
	e.applied[in.Key]++
	return nil, effectResult{Applied: e.applied[in.Key]}, nil
}

// counts returns how many times key's effect was applied and aborted.
func (e *effects) counts(key string) (applied, aborted int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.applied[key], e.aborted[key]
}
