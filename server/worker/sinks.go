package worker

import (
	"context"
	"errors"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/claimcheck"
	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/store"
)

// sessionLogs reads sessions' durable logs for the event sinks
// (activities.DeliverEvents) as a client reads them: the session's events
// query, and the segments of the content store through its codec, which
// wrote them (codecSegments).
type sessionLogs struct {
	c     client.Client
	codec *store.Codec // nil: no content store, so no segments
}

var _ activities.SessionLog = sessionLogs{}

func (l sessionLogs) EventsPage(ctx context.Context, sessionID string, q api.EventsQuery) (api.EventsPage, error) {
	v, err := l.c.QueryWorkflow(ctx, sessionID, "", api.QueryEvents, q)
	if err != nil {
		return api.EventsPage{}, err
	}
	var page api.EventsPage
	return page, v.Get(&page)
}

func (l sessionLogs) Segment(ctx context.Context, seg api.EventSegment) ([]keel.Envelope, error) {
	if l.codec == nil {
		return nil, errors.New("the log is in a content store this worker does not have")
	}
	k, err := claimcheck.ParseKey(seg.Key)
	if err != nil {
		return nil, err
	}
	out, err := l.codec.Decode([]*commonpb.Payload{claimcheck.Reference(k, seg.Size)})
	if err != nil {
		return nil, err
	}
	var evs []keel.Envelope
	return evs, converter.GetDefaultDataConverter().FromPayload(out[0], &evs)
}
