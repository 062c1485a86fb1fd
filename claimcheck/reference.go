package claimcheck

import (
	"encoding/json"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
)

// EncodingClaimCheck is the "encoding" metadata of a reference payload.
// Anything that finds it knows the payload's data is a reference, not a
// value, and that keel's store codec (or its codec endpoint) turns it back.
const EncodingClaimCheck = "keel/claim-check"

// reference is the data of a reference payload. Size is the length of the
// stored object, so a reader of a history can tell how much was offloaded
// without fetching it.
type reference struct {
	Key  Key `json:"key"`
	Size int `json:"size"`
}

// Reference returns the reference payload for a value stored under key
// that is size bytes long: metadata {"encoding": "keel/claim-check"} and
// data {"key":"sha256:...","size":N}. The value must be a proto-marshaled
// Payload, as store.Codec and its PutPayload store them; Reference lets a
// process that holds only the key of such a value hand it to anything that
// decodes through that codec.
func Reference(key Key, size int) *commonpb.Payload {
	// Marshaling a struct of a string and an int cannot fail, and its
	// output is the same for the same input, which replay relies on.
	data, _ := json.Marshal(reference{Key: key, Size: size})
	return &commonpb.Payload{
		Metadata: map[string][]byte{converter.MetadataEncoding: []byte(EncodingClaimCheck)},
		Data:     data,
	}
}

// IsReference reports whether p is a claim-check reference payload.
func IsReference(p *commonpb.Payload) bool {
	return p != nil && string(p.GetMetadata()[converter.MetadataEncoding]) == EncodingClaimCheck
}

// ParseReference returns the key and size a reference payload holds.
func ParseReference(p *commonpb.Payload) (Key, int, error) {
	if !IsReference(p) {
		return "", 0, fmt.Errorf("%w: payload encoding is not %s", ErrInvalidReference, EncodingClaimCheck)
	}
	var ref reference
	if err := json.Unmarshal(p.GetData(), &ref); err != nil {
		return "", 0, fmt.Errorf("%w: %w", ErrInvalidReference, err)
	}
	key, err := ParseKey(string(ref.Key))
	if err != nil {
		return "", 0, fmt.Errorf("%w: %w", ErrInvalidReference, err)
	}
	return key, ref.Size, nil
}
