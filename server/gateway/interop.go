package gateway

import (
	"context"
	"iter"
	"net/http"
	"time"

	"github.com/keelrun/keel"
)

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

// followRun follows one run's events on sw for an MCP call or an A2A
// stream: each event of the run goes to on, until on says the stream is
// over (false), the events end, or the request does. An error that ends
// the events (the request's end aside) goes to fault; a lag report is
// skipped. A comment keeps the stream alive when nothing was written for
// a keep-alive period.
func (g *Gateway) followRun(ctx context.Context, sw *SSEWriter, run string, events func(context.Context) iter.Seq2[keel.Envelope, error],
	on func(keel.Envelope) bool, fault func(error)) {
	evs := startPump(ctx, events)
	defer evs.stop()
	keepAlive := time.NewTicker(g.opts.KeepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case it, ok := <-evs.ch:
			switch {
			case !ok:
				return
			case keelLagged(it.err):
				continue
			case it.err != nil:
				if ctx.Err() == nil {
					fault(it.err)
				}
				return
			case it.env.RunID != run:
				continue
			}
			if !on(it.env) {
				return
			}
		case <-keepAlive.C:
			if time.Since(sw.Wrote) >= g.opts.KeepAlive && sw.Comment("keep-alive") != nil {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}
