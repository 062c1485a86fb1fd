package gateway

import "net/http"

// interopState is what the MCP and A2A endpoints keep (docs/interop.md):
// the MCP calls this process streams, for a client's cancel to find.
type interopState struct {
	calls mcpCalls
}

// routeInterop mounts the endpoints other agents and tools call: MCP at
// /v1/mcp and A2A under /v1/a2a. They name their sessions in their
// bodies (or make new ones under the key's prefix) and check them
// themselves.
func (g *Gateway) routeInterop() {
	for _, m := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
		g.handle(Route{Method: m, Path: "/v1/mcp", sessions: true}, http.HandlerFunc(g.serveMCP))
	}
	g.routeA2A()
}
