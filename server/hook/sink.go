package hook

import (
	"context"

	"github.com/keelrun/keel"
)

// Sink receives the durable events of every session of a worker, at
// least once and in sequence order per session (docs/contract.md §23.6):
// the worker declares it (worker.Options.Sinks, keel.yaml sinks), and no
// run names it. A delivery that fails is made again, from its first
// event, until it succeeds: a sink makes each (session, seq) count once.
type Sink interface {
	// Deliver takes events of one session, in sequence order, with no
	// gap after the previous delivery's last. It must stop when ctx is
	// cancelled.
	Deliver(ctx context.Context, sessionID string, events []keel.Envelope) error
}
