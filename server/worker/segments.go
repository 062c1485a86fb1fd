package worker

import (
	"context"

	"go.temporal.io/sdk/converter"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/claimcheck"
	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/store"
)

// codecSegments writes event segments through the content store's codec,
// as claim-checked payloads of the default converter, so a client reads one
// back by decoding claimcheck.Reference(key, size) with its data converter.
type codecSegments struct{ codec *store.Codec }

var _ activities.SegmentStore = codecSegments{}

func (s codecSegments) StoreSegment(ctx context.Context, events []keel.Envelope) (string, int, error) {
	p, err := converter.GetDefaultDataConverter().ToPayload(events)
	if err != nil {
		return "", 0, err
	}
	ref, err := s.codec.PutPayload(ctx, p)
	if err != nil {
		return "", 0, err
	}
	key, size, err := claimcheck.ParseReference(ref)
	return string(key), size, err
}
