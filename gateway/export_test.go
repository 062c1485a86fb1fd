package gateway

// SetRingEvents shrinks the durable events a session's hub keeps, so a
// test can make a stream catch up from pages. Call it before any stream.
func SetRingEvents(g *Gateway, n int) { g.ringEvents = n }

// Hubs reports how many sessions the gateway follows.
func Hubs(g *Gateway) int {
	g.hubsMu.Lock()
	defer g.hubsMu.Unlock()
	return len(g.hubs)
}
