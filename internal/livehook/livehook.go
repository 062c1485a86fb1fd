// Package livehook lets a test watch a live.NATS subscription handle the
// messages nats.go hands it, as net/http/httptrace lets a caller watch a
// request: the hook travels in the context given to Subscribe. The tests
// of the NATS channel live in the server module, beside the NATS server
// they run (docs/ARCHITECTURE.md, "Modules"), and so cannot reach live's
// internals; this is the one thing they need of them. Nothing else sets
// a hook.
package livehook

import "context"

type handledKey struct{}

// WithHandled returns ctx carrying handled, which a subscription made
// with it calls after each received message has been handled: delivered,
// dropped as a repeat, or rejected. It runs on the goroutine that
// handles messages (nats.go's, or the decoding one with a Decoder), so
// while it blocks the subscription handles nothing more.
func WithHandled(ctx context.Context, handled func()) context.Context {
	return context.WithValue(ctx, handledKey{}, handled)
}

// Handled returns the hook ctx carries, or nil.
func Handled(ctx context.Context) func() {
	f, _ := ctx.Value(handledKey{}).(func())
	return f
}
