package activities

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
)

// StoreEventsName is the local activity that writes a run of a session's
// durable events to the content store as one immutable segment.
const StoreEventsName = "StoreEvents"

// SegmentStore writes event segments. A worker with a content store
// provides one; without it the session keeps its whole log in memory.
type SegmentStore interface {
	// StoreSegment writes events as one value and returns its key and size.
	// Writing the same events twice returns the same key.
	StoreSegment(ctx context.Context, events []keel.Envelope) (key string, size int, err error)
}

// StoreEvents writes events (dense, in sequence order) as one segment. It
// runs as a local activity: its input never enters history, only the
// segment's reference does.
func (a *Activities) StoreEvents(ctx context.Context, events []keel.Envelope) (api.EventSegment, error) {
	if a.Segments == nil {
		return api.EventSegment{}, temporal.NewNonRetryableApplicationError(
			"no content store configured: the session keeps its events in memory", ErrNoStore, nil)
	}
	if len(events) == 0 {
		return api.EventSegment{}, temporal.NewNonRetryableApplicationError("no events to store", string(keel.CodeInternal), nil)
	}
	key, size, err := a.Segments.StoreSegment(ctx, events)
	if err != nil {
		// Retryable: a store that is down now may be back at the next try.
		return api.EventSegment{}, fmt.Errorf("store events %d..%d: %w", events[0].Seq, events[len(events)-1].Seq, err)
	}
	return api.EventSegment{First: events[0].Seq, Last: events[len(events)-1].Seq, Key: key, Size: size}, nil
}

// ErrNoStore is the application error type of StoreEvents on a worker
// without a content store.
const ErrNoStore = "NoContentStore"
