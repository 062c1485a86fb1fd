package claimcheck

import (
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
)

// MetadataAttachment marks a payload that holds an attachment's bytes
// (keel.Attachment): keel's store codec stores it whatever its size, so
// the reference is all that a history holds, and a worker reads back as an
// attachment only a value stored with this mark.
const MetadataAttachment = "keel-attachment"

// AttachmentPayload is the payload of an attachment's bytes: binary, with
// its media type and the attachment mark.
func AttachmentPayload(mediaType string, data []byte) *commonpb.Payload {
	return &commonpb.Payload{
		Metadata: map[string][]byte{
			converter.MetadataEncoding: []byte(converter.MetadataEncodingBinary),
			MetadataAttachment:         []byte(mediaType),
		},
		Data: data,
	}
}

// IsAttachment reports whether p is an attachment's payload, and its
// media type.
func IsAttachment(p *commonpb.Payload) (string, bool) {
	t, ok := p.GetMetadata()[MetadataAttachment]
	return string(t), ok && string(p.GetMetadata()[converter.MetadataEncoding]) == converter.MetadataEncodingBinary
}
