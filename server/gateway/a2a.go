package gateway

// routeA2A mounts the A2A endpoints (docs/interop.md, "A2A").
func (g *Gateway) routeA2A() {}
