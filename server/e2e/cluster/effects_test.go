package cluster_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/keelrun/keel/server/tool/mcp"
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
// worker died mid-call counts as aborted. Like any tool with side effects
// under at-least-once execution, it applies once per idempotency key
// (the key keel sends in _meta, mcp.IdempotencyKeyMeta): an attempt of a
// call already applied counts as deduplicated. An effect applied twice
// for one key is what the checks forbid.
type effects struct {
	mu      sync.Mutex
	applied map[string]int
	aborted map[string]int
	deduped map[string]int
	done    map[string]bool // idempotency keys applied
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
	e := &effects{applied: map[string]int{}, aborted: map[string]int{}, deduped: map[string]int{}, done: map[string]bool{}}
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

func (e *effects) call(ctx context.Context, req *sdk.CallToolRequest, in effectArgs) (*sdk.CallToolResult, effectResult, error) {
	select {
	case <-time.After(time.Duration(in.MS) * time.Millisecond):
	case <-ctx.Done():
	}
	idem, _ := req.Params.Meta[mcp.IdempotencyKeyMeta].(string)
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case ctx.Err() != nil:
		e.aborted[in.Key]++
		return nil, effectResult{}, ctx.Err()
	case idem != "" && e.done[idem]:
		e.deduped[in.Key]++
		return nil, effectResult{Applied: e.applied[in.Key]}, nil
	}
	e.done[idem] = idem != ""
	e.applied[in.Key]++
	return nil, effectResult{Applied: e.applied[in.Key]}, nil
}

// counts returns how many times key's effect was applied, how many of its
// attempts were aborted, and how many were deduplicated.
func (e *effects) counts(key string) (applied, aborted, deduped int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.applied[key], e.aborted[key], e.deduped[key]
}
