package crypt

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"
)

// Metadata of an encrypted payload.
const (
	// EncodingEncrypted is the "encoding" metadata of a payload this codec
	// wrote. Its data is a 12-byte nonce followed by the AES-256-GCM
	// ciphertext of the original payload, proto-marshaled (metadata and
	// all, so not even the original encoding shows).
	EncodingEncrypted = "binary/encrypted"
	// MetadataKeyID names the key the payload is encrypted with. It is
	// authenticated too: the ID is the ciphertext's additional data.
	MetadataKeyID = "encryption-key-id"
)

// Codec is a converter.PayloadCodec that encrypts every payload with the
// keyring's current key (AES-256-GCM, a random nonce per payload) and
// decrypts with the key its metadata names. Encrypted payloads pass
// Encode unchanged, so the codec can sit in a chain that encodes a
// payload twice. Decode accepts only ciphertext: a payload that is not
// encrypted fails with ErrPlaintext, so that whoever can write to
// Temporal without the keys cannot hand a worker input of their own,
// unless the codec was made with AllowPlaintext. It is safe for
// concurrent use.
type Codec struct {
	current        string
	aeads          map[string]cipher.AEAD
	allowPlaintext bool
}

var _ converter.PayloadCodec = (*Codec)(nil)

// Option configures NewCodec.
type Option func(*Codec)

// AllowPlaintext makes Decode pass payloads that are not encrypted
// unchanged instead of failing with ErrPlaintext. It is for a deployment
// that switches encryption on while histories and store objects written
// before hold plaintext (docs/operations.md, "Switching encryption on"),
// and for readers that decode through a codec endpoint, which hands back
// what it decrypted in the clear.
func AllowPlaintext() Option { return func(c *Codec) { c.allowPlaintext = true } }

// NewCodec returns a Codec over the keys of r.
func NewCodec(r *Keyring, opts ...Option) *Codec {
	c := &Codec{current: r.Current(), aeads: make(map[string]cipher.AEAD, len(r.ids))}
	for _, o := range opts {
		o(c)
	}
	for id, key := range r.keys {
		block, err := aes.NewCipher(key)
		if err != nil {
			panic("crypt: " + err.Error()) // unreachable: keys are KeySize bytes
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			panic("crypt: " + err.Error()) // unreachable: AES has a 16-byte block
		}
		c.aeads[id] = aead
	}
	return c
}

// NewDataConverter returns Temporal's default data converter with c
// applied to every payload, for processes without a content store. Unless
// c allows plaintext, query handlers registered under ReadOnly decode
// their arguments with plaintext allowed.
func NewDataConverter(c *Codec) converter.DataConverter {
	dc := converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), c)
	if c.allowPlaintext {
		return dc
	}
	return WithReadOnlyDecoding(dc, converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), c.AllowingPlaintext()))
}

// IsEncrypted reports whether p was written by a Codec.
func IsEncrypted(p *commonpb.Payload) bool {
	return p != nil && string(p.GetMetadata()[converter.MetadataEncoding]) == EncodingEncrypted
}

// KeyID returns the ID of the key an encrypted payload names, "" for
// other payloads.
func KeyID(p *commonpb.Payload) string {
	if !IsEncrypted(p) {
		return ""
	}
	return string(p.GetMetadata()[MetadataKeyID])
}

// Encode encrypts each payload that is not encrypted yet.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		out[i] = p
		if p == nil || IsEncrypted(p) {
			continue
		}
		sealed, err := c.seal(p)
		if err != nil {
			return nil, err
		}
		out[i] = sealed
	}
	return out, nil
}

func (c *Codec) seal(p *commonpb.Payload) (*commonpb.Payload, error) {
	plain, err := proto.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("crypt: encrypt a payload: marshal: %w", err)
	}
	aead := c.aeads[c.current]
	// A random 96-bit nonce per payload: well within GCM's limits for the
	// number of payloads one key encrypts before it is rotated.
	data := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
	if _, err := rand.Read(data); err != nil {
		return nil, fmt.Errorf("crypt: encrypt a payload: nonce: %w", err)
	}
	data = aead.Seal(data, data, plain, []byte(c.current))
	return &commonpb.Payload{
		Metadata: map[string][]byte{
			converter.MetadataEncoding: []byte(EncodingEncrypted),
			MetadataKeyID:              []byte(c.current),
		},
		Data: data,
	}, nil
}

// AllowsPlaintext reports whether Decode lets payloads that are not
// encrypted through (AllowPlaintext).
func (c *Codec) AllowsPlaintext() bool { return c.allowPlaintext }

// Decode decrypts each payload. A payload under a key the keyring does not
// hold fails with ErrUnknownKey, one that does not authenticate with
// ErrDecrypt, and one that is not encrypted with ErrPlaintext (unless
// AllowPlaintext). A nil payload (none) passes.
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		out[i] = p
		if p == nil {
			continue
		}
		if !IsEncrypted(p) {
			if c.allowPlaintext {
				continue
			}
			return nil, plaintextError(p)
		}
		opened, err := c.open(p)
		if err != nil {
			return nil, err
		}
		out[i] = opened
	}
	return out, nil
}

func (c *Codec) open(p *commonpb.Payload) (*commonpb.Payload, error) {
	id := KeyID(p)
	aead, ok := c.aeads[id]
	if !ok {
		return nil, fmt.Errorf("%w: a payload is encrypted with key %q, which the key file does not hold (keep old keys after the current one until no history or store object uses them)", ErrUnknownKey, id)
	}
	data := p.GetData()
	if len(data) < aead.NonceSize()+aead.Overhead() {
		return nil, fmt.Errorf("%w: key %q: %d bytes are too short to be a ciphertext", ErrDecrypt, id, len(data))
	}
	plain, err := aead.Open(nil, data[:aead.NonceSize()], data[aead.NonceSize():], []byte(id))
	if err != nil {
		return nil, fmt.Errorf("%w: key %q: the ciphertext does not authenticate (altered, or another key under the same ID)", ErrDecrypt, id)
	}
	var orig commonpb.Payload
	if err := proto.Unmarshal(plain, &orig); err != nil {
		return nil, fmt.Errorf("%w: key %q: the plaintext is not a payload: %w", ErrDecrypt, id, err)
	}
	return &orig, nil
}

// plaintextError names what a refused payload says it is, never its data.
func plaintextError(p *commonpb.Payload) error {
	enc := string(p.GetMetadata()[converter.MetadataEncoding])
	if len(enc) > 40 {
		enc = enc[:40] + "..."
	}
	return fmt.Errorf("%w: a payload with encoding %q (%d bytes) reached a codec that accepts only ciphertext "+
		"(written without the keys; a deployment switching encryption on allows plaintext for a while)", ErrPlaintext, enc, len(p.GetData()))
}
