package client

import (
	"context"
	"fmt"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/claimcheck"
)

// segment reads a segment of a session's durable log from the content
// store, through the client's data converter: its codec fetches the value
// from the store, or from a codec endpoint that can reach it.
func (c *Client) segment(ctx context.Context, seg api.EventSegment) ([]keel.Envelope, error) {
	var evs []keel.Envelope
	if err := c.dc.FromPayload(claimcheck.Reference(claimcheck.Key(seg.Key), seg.Size), &evs); err != nil {
		return nil, fmt.Errorf("keel: events %d..%d are in the content store and could not be read "+
			"(give the client the worker's store or its codec endpoint): %w", seg.First, seg.Last, err)
	}
	if len(evs) == 0 || evs[0].Seq != seg.First || evs[len(evs)-1].Seq != seg.Last {
		return nil, &keel.Error{Code: keel.CodeInternal,
			Message: fmt.Sprintf("segment %s does not hold events %d..%d", seg.Key, seg.First, seg.Last)}
	}
	return evs, nil
}
