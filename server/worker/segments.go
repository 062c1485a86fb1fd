package worker

import (
	"context"
	"errors"

	commonpb "go.temporal.io/api/common/v1"
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

// codecAttachments reads and writes attachments through the content
// store's codec, as claimcheck.AttachmentPayload values.
type codecAttachments struct{ codec *store.Codec }

var _ activities.AttachmentStore = codecAttachments{}

func (s codecAttachments) ReadAttachment(ctx context.Context, key string, size int64) (string, []byte, error) {
	k, err := claimcheck.ParseKey(key)
	if err != nil {
		return "", nil, err
	}
	out, err := s.codec.Decode([]*commonpb.Payload{claimcheck.Reference(k, int(size))})
	if err != nil {
		return "", nil, err
	}
	mediaType, ok := claimcheck.IsAttachment(out[0])
	if !ok {
		return "", nil, errors.New("the stored value is not an attachment")
	}
	return mediaType, out[0].GetData(), nil
}

func (s codecAttachments) StoreAttachment(ctx context.Context, mediaType string, data []byte) (string, int64, error) {
	ref, err := s.codec.PutPayload(ctx, claimcheck.AttachmentPayload(mediaType, data))
	if err != nil {
		return "", 0, err
	}
	key, size, err := claimcheck.ParseReference(ref)
	return string(key), int64(size), err
}
