package gateway_test

import (
	"context"
	"net/http"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/keelrun/keel/server/gateway"
)

// interopAgents are the shared worker's agents as the gateway describes
// them (keel serve --config gives it the same from keel.yaml).
func interopAgents() []gateway.Agent {
	var out []gateway.Agent
	for _, a := range testAgents {
		out = append(out, gateway.Agent{Name: a.Name, Description: a.Description, OutputSchema: a.OutputSchema})
	}
	slices.SortFunc(out, func(a, b gateway.Agent) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}

// bearerTransport adds an API key to every request.
type bearerTransport struct {
	key  string
	base http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if b.key != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+b.key)
	}
	return b.base.RoundTrip(r)
}

// mcpConnect opens an MCP session with the gateway as key (none: "").
func mcpConnect(t testing.TB, ctx context.Context, s *stack, key string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "keel-test", Version: "v0"}, opts)
	hc := &http.Client{Transport: bearerTransport{key: key, base: http.DefaultTransport}}
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.srv.URL + "/v1/mcp", HTTPClient: hc}, nil)
	if err != nil {
		t.Fatalf("MCP connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}
