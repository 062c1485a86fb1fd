package live

import (
	"context"
	"errors"
	"fmt"

	"github.com/keelrun/keel"
)

// Publisher sends ephemeral events. Publish must not block on subscribers,
// and must not wait long for anything else: it is called from the run's
// activities, which a live reader must never slow down.
type Publisher interface {
	Publish(ctx context.Context, env keel.Envelope) error
}

// Channel is a live channel: publish ephemeral events, subscribe to a
// session's.
type Channel interface {
	Publisher
	// Subscribe follows the session's ephemeral events from now on.
	Subscribe(ctx context.Context, sessionID string, opts SubscribeOptions) (Subscription, error)
	// Close releases the channel's resources; subscriptions end.
	Close() error
}

// SubscribeOptions tune a subscription.
type SubscribeOptions struct {
	// Buffer is the number of events held for a slow subscriber before it
	// lags. Optional; default DefaultBuffer.
	Buffer int
}

// DefaultBuffer is the default subscriber buffer.
const DefaultBuffer = 1024

// Subscription is one subscriber's view of a session's live events.
//
// Events published by one publisher arrive in the order it published them.
// When the buffer is full the oldest buffered event is dropped: the reader
// keeps the freshest events and learns what it lost from one *LaggedError,
// returned in the lost events' place.
type Subscription interface {
	// Next returns the next event. After the buffer overflowed it returns a
	// *LaggedError once, then continues with the oldest retained event.
	// It returns ErrClosed after Close, or ctx's error.
	Next(ctx context.Context) (keel.Envelope, error)
	Close() error
}

// LaggedError says a subscriber missed events because it fell behind (or,
// across processes, because they were lost on the way). Missed is the exact
// number of events lost at this point of the stream. The live view is now
// incomplete: catch up on durable events from the last sequence seen.
// Missed 0 says the channel lost its connection to its server: events
// may have been lost meanwhile, how many is unknown (none, or all of a
// run's that ended before it came back, which no later event would
// reveal).
type LaggedError struct{ Missed int }

func (e *LaggedError) Error() string {
	return fmt.Sprintf("live: subscriber lagged and missed %d events", e.Missed)
}

// ErrClosed is returned by Next after the subscription or channel closed,
// and by Publish and Subscribe after the channel closed.
var ErrClosed = errors.New("live: subscription closed")

// Subject returns the NATS subject of a session's live events.
func Subject(prefix, sessionID string) string { return prefix + ".session." + sessionID }
