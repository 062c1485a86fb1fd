package crypt_test

import (
	"errors"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"github.com/keelrun/keel/crypt"
)

// FuzzCodecDecode feeds Decode payloads as an attacker who can write to
// Temporal makes them: any encoding, any key ID, any data. Decode never
// panics, and what it accepts is ciphertext of a key the keyring holds
// (it never passes a payload through); everything else is ErrPlaintext,
// ErrUnknownKey or ErrDecrypt.
func FuzzCodecDecode(f *testing.F) {
	keys := crypt.NewKeyring("a", make([]byte, crypt.KeySize))
	c := crypt.NewCodec(keys)
	real, _ := converter.GetDefaultDataConverter().ToPayload("hello")
	enc, err := c.Encode([]*commonpb.Payload{real})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(crypt.EncodingEncrypted, "a", enc[0].GetData())
	f.Add("json/plain", "", []byte(`{"text":"x"}`))
	f.Add(crypt.EncodingEncrypted, "b", enc[0].GetData())
	f.Add(crypt.EncodingEncrypted, "a", []byte("short"))
	f.Add("", "", []byte{})
	f.Fuzz(func(t *testing.T, encoding, keyID string, data []byte) {
		p := &commonpb.Payload{Metadata: map[string][]byte{converter.MetadataEncoding: []byte(encoding),
			crypt.MetadataKeyID: []byte(keyID)}, Data: data}
		out, err := c.Decode([]*commonpb.Payload{p})
		if err != nil {
			if !errors.Is(err, crypt.ErrPlaintext) && !errors.Is(err, crypt.ErrUnknownKey) && !errors.Is(err, crypt.ErrDecrypt) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		if encoding != crypt.EncodingEncrypted || keyID != "a" || len(out) != 1 || out[0] == p {
			t.Fatalf("Decode accepted a payload that is not ciphertext under key a: %v", p.GetMetadata())
		}
	})
}
