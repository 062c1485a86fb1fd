package client

import (
	"context"
	"errors"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/claimcheck"
)

// Attach stores an image or a PDF in the workers' content store and
// returns the reference a prompt or steering carries (WithAttachments,
// Run.SteerAttached). The bytes are checked here first: a media type keel
// takes (keel.AttachmentTypes) that the content's first bytes agree with,
// within its kind's limit; name is for display. It fails with
// keel.ErrInvalidInput or keel.ErrTooLarge for what keel does not take,
// with ErrNoContentStore when the client has no way to the store
// (Options.Attachments), and with the store's error when it fails.
func (c *Client) Attach(ctx context.Context, name, mediaType string, data []byte) (keel.Attachment, error) {
	kind, err := keel.CheckAttachmentData(mediaType, data)
	if err != nil {
		return keel.Attachment{}, err
	}
	a := keel.Attachment{Kind: kind, MediaType: mediaType, Name: name, Bytes: int64(len(data))}
	if c.attach == nil {
		return keel.Attachment{}, ErrNoContentStore
	}
	if err := ctx.Err(); err != nil {
		return keel.Attachment{}, err
	}
	out, err := c.attach.Encode([]*commonpb.Payload{claimcheck.AttachmentPayload(mediaType, data)})
	if err != nil {
		return keel.Attachment{}, fmt.Errorf("keel: storing the attachment: %w", err)
	}
	key, size, err := claimcheck.ParseReference(out[0])
	if err != nil {
		return keel.Attachment{}, fmt.Errorf("%w (the codec did not store it)", ErrNoContentStore)
	}
	a.Key, a.Size = string(key), int64(size)
	if err := a.Validate(); err != nil {
		return keel.Attachment{}, err
	}
	return a, nil
}

// ErrNoContentStore is Attach's error when no content store can take an
// attachment.
var ErrNoContentStore = errors.New("keel: attachments need the workers' content store (client.Options.Attachments, or keel dev's codec endpoint)")

// WithAttachments sends attachments (from Attach) with the prompt.
func WithAttachments(atts ...keel.Attachment) SendOption {
	return func(r *api.SendRequest) { r.Attachments = append(r.Attachments, atts...) }
}

// defaultAttachments is the codec that stores attachments for a client
// that reads through the codec endpoint: the endpoint, asked to encode.
func defaultAttachments(endpoint string) converter.PayloadCodec {
	return claimcheck.NewRemoteCodec(endpoint, claimcheck.RemoteOptions{EncodeRemotely: true})
}
