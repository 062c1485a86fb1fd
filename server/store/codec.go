package store

import (
	"context"
	"fmt"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/keelrun/keel/claimcheck"
	"github.com/keelrun/keel/crypt"
)

// Defaults for CodecOptions.
const (
	// DefaultThreshold keeps small values inline, where a reference would
	// save little and cost a store round trip.
	DefaultThreshold = 4 << 10
	// DefaultTimeout bounds each Encode or Decode: PayloadCodec methods take
	// no context, and a hung store must fail the call, not hang the worker.
	DefaultTimeout = 30 * time.Second
)

// CodecOptions configures a Codec.
type CodecOptions struct {
	// Threshold is the proto-marshaled size in bytes above which a payload
	// is offloaded. Zero means DefaultThreshold.
	Threshold int
	// Timeout bounds the store calls of one Encode or Decode. Zero means
	// DefaultTimeout.
	Timeout time.Duration
	// Encryption, if set, encodes every payload before the codec looks at
	// it and decodes every payload after references are resolved: with
	// keel's encryption codec (crypt.Codec), histories and the store alike
	// hold only ciphertext (encrypt, then offload). PutPayload applies it
	// too, so values stored directly are covered. Optional; default none.
	Encryption converter.PayloadCodec
	// WholeObjects stores each offloaded payload as one object, as keel
	// did before values were chunked (see putValue), for measurements
	// against that. Optional; default false: chunks and a tree, so values
	// that share a prefix share its chunks.
	WholeObjects bool
}

// Codec is a claim-check converter.PayloadCodec: Encode moves large
// payloads into a Store and leaves small references in their place; Decode
// brings them back. Without encryption it is deterministic (the same
// payload always becomes the same reference, stored once). With
// CodecOptions.Encryption every encoding differs (random nonces), which
// replay tolerates: the SDK matches commands to history by type and ID,
// never by payload, and decodes what history holds.
type Codec struct {
	store     *Store
	threshold int
	timeout   time.Duration
	encrypt   converter.PayloadCodec // nil: none
	whole     bool
}

var _ converter.PayloadCodec = (*Codec)(nil)

// NewCodec returns a Codec that offloads to s.
func NewCodec(s *Store, opts CodecOptions) *Codec {
	c := &Codec{store: s, threshold: opts.Threshold, timeout: opts.Timeout, encrypt: opts.Encryption, whole: opts.WholeObjects}
	if c.threshold <= 0 {
		c.threshold = DefaultThreshold
	}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	return c
}

// NewDataConverter returns Temporal's default data converter with c applied
// to every payload, for client.Options.DataConverter. With an encryption
// codec that accepts only ciphertext (crypt.Codec), query handlers
// registered under crypt.ReadOnly decode their arguments with plaintext
// allowed, as readers without the keys send them.
func NewDataConverter(c *Codec) converter.DataConverter {
	dc := converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), c)
	cc, ok := c.encrypt.(*crypt.Codec)
	if !ok || cc.AllowsPlaintext() {
		return dc
	}
	lenient := *c
	lenient.encrypt = cc.AllowingPlaintext()
	return crypt.WithReadOnlyDecoding(dc, converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), &lenient))
}

// marshal is deterministic so that equal payloads (maps included) give equal
// bytes, hence equal keys.
var marshal = proto.MarshalOptions{Deterministic: true}

// Encode replaces each payload whose marshaled size exceeds the threshold,
// and every attachment, with a reference to it. Smaller payloads and
// references pass unchanged.
// If the store fails, Encode fails: a value is never dropped. With
// CodecOptions.Encryption, payloads are encrypted first, and the size that
// counts is the ciphertext's.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	// An attachment is stored whatever its size (claimcheck.MetadataAttachment).
	attached := make([]bool, len(payloads))
	for i, p := range payloads {
		_, attached[i] = claimcheck.IsAttachment(p)
	}
	payloads, err := c.encrypted(payloads)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		out[i] = p
		if p == nil || claimcheck.IsReference(p) || (proto.Size(p) <= c.threshold && !attached[i]) {
			continue
		}
		ref, err := c.PutPayload(ctx, p)
		if err != nil {
			return nil, err
		}
		out[i] = ref
	}
	return out, nil
}

// PutPayload stores p whatever its size and returns its reference, for
// values that should stay out of a history even when small, such as
// event-log segments. A payload larger than one chunk is stored as
// content-defined chunks and a tree over them (see putValue), so payloads
// that share a prefix share their chunks; the reference names the tree's
// root and its size is still the marshaled payload's length.
func (c *Codec) PutPayload(ctx context.Context, p *commonpb.Payload) (*commonpb.Payload, error) {
	sealed, err := c.encrypted([]*commonpb.Payload{p})
	if err != nil {
		return nil, err
	}
	data, err := marshal.Marshal(sealed[0])
	if err != nil {
		return nil, fmt.Errorf("store: claim-check a payload for %s: marshal: %w", c.store.url, err)
	}
	put := c.store.putValue
	if c.whole {
		put = c.store.Put
	}
	key, err := put(ctx, data)
	if err != nil {
		return nil, err
	}
	return claimcheck.Reference(key, len(data)), nil
}

// Decode replaces each reference with the payload it names, verified
// against its key, then (with CodecOptions.Encryption) decrypts. Without
// encryption other payloads pass unchanged; with keel's crypt.Codec, a
// payload that is not ciphertext (inline, or the object a reference
// names) fails with crypt.ErrPlaintext unless the codec allows plaintext.
// References themselves are written by this codec in the clear and hold
// no value, only a key, so they are resolved first and what they name is
// decrypted.
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		out[i] = p
		if !claimcheck.IsReference(p) {
			continue
		}
		key, _, err := claimcheck.ParseReference(p)
		if err != nil {
			return nil, err
		}
		data, err := c.store.getValue(ctx, key)
		if err != nil {
			return nil, err
		}
		var orig commonpb.Payload
		if err := proto.Unmarshal(data, &orig); err != nil {
			return nil, fmt.Errorf("%w: %s in %s holds no payload: %w", ErrInvalidReference, key, c.store.url, err)
		}
		out[i] = &orig
	}
	if c.encrypt == nil {
		return out, nil
	}
	return c.encrypt.Decode(out)
}

// encrypted applies the encryption codec, if any. Payloads it encrypted
// already (a chain that runs it too, a retried PutPayload) pass unchanged.
// References stay readable: they name ciphertext already.
func (c *Codec) encrypted(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	if c.encrypt == nil {
		return payloads, nil
	}
	out := append([]*commonpb.Payload(nil), payloads...)
	for i, p := range payloads {
		if p == nil || claimcheck.IsReference(p) {
			continue
		}
		enc, err := c.encrypt.Encode(out[i : i+1])
		if err != nil {
			return nil, err
		}
		out[i] = enc[0]
	}
	return out, nil
}
