package live

import (
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/crypt"
)

// The two wire forms of an event (docs/live.md, "Across processes"):
//
//   - in clear, the JSON envelope is the message's body and the stream
//     counter is its Keel-Live header;
//   - encrypted, the body is a proto-encoded Temporal Payload that
//     crypt.Codec sealed (encoding "binary/encrypted", the key's ID in its
//     metadata). Sealed inside it is a payload of encoding "json/plain"
//     whose data is the JSON envelope and whose "keel-live" metadata is the
//     stream counter, so the counter is as authenticated as the event, and
//     a payload sealed for anything else (Temporal history) is not an event.
//
// A JSON envelope starts with '{', which no proto-encoded Payload does (it
// would be field 15, which Payload does not have), so one look tells the
// forms apart; which one a subscriber accepts is its own configuration's
// choice, never the message's.
const (
	// metaLive is the metadata of a sealed event's inner payload that
	// holds its stream counter.
	metaLive = "keel-live"
	// encodingJSON is the inner payload's encoding.
	encodingJSON = "json/plain"
	// sealOverhead bounds what encryption adds to an envelope: the inner
	// and outer payloads' metadata, the nonce and the tag.
	sealOverhead = 1 << 10
)

// encode turns a queued event into its NATS message.
func (c *NATS) encode(o outMsg) (*nats.Msg, error) {
	if c.opts.Encryption == nil {
		return &nats.Msg{Subject: o.subject, Data: o.data, Header: nats.Header{headerLive: []string{o.counter}}}, nil
	}
	inner := &commonpb.Payload{
		Metadata: map[string][]byte{converter.MetadataEncoding: []byte(encodingJSON), metaLive: []byte(o.counter)},
		Data:     o.data,
	}
	sealed, err := c.opts.Encryption.Encode([]*commonpb.Payload{inner})
	if err != nil {
		return nil, err
	}
	body, err := proto.Marshal(sealed[0])
	if err != nil {
		return nil, err
	}
	return &nats.Msg{Subject: o.subject, Data: body}, nil
}

// received is a message a subscription took off the wire, before its
// checks.
type received struct {
	data    []byte
	counter string // the Keel-Live header, used only for a plaintext event
}

// opened is a received event that passed every check.
type opened struct {
	env    keel.Envelope
	stream string
	n      uint64
	counts bool // stream and n are set
}

// form is what a received message looks like.
type form int

const (
	formJSON      form = iota // a JSON envelope
	formEncrypted             // a sealed payload
	formOther                 // neither
)

// classify tells the wire forms apart; p is the payload of formEncrypted.
func classify(data []byte) (form, *commonpb.Payload) {
	if len(data) > 0 && data[0] == '{' {
		return formJSON, nil
	}
	var p commonpb.Payload
	if proto.Unmarshal(data, &p) != nil || !crypt.IsEncrypted(&p) {
		return formOther, nil
	}
	return formEncrypted, &p
}

// openPlain checks a plaintext event for the subscription's session.
func (s *natsSub) openPlain(r received) (opened, error) {
	env, err := decodeEnvelope(s.session, r.data, s.c.opts.MaxEventBytes)
	if err != nil {
		return opened{}, err
	}
	o := opened{env: env}
	o.stream, o.n, o.counts = parseLive(r.counter)
	return o, nil
}

// openDecrypted checks the payload that a sealed event decrypted to.
func (s *natsSub) openDecrypted(p *commonpb.Payload) (opened, error) {
	md := p.GetMetadata()
	counter, ok := md[metaLive]
	if !ok || string(md[converter.MetadataEncoding]) != encodingJSON {
		return opened{}, reject(ReasonMalformed, "encrypted payload is not a live event")
	}
	env, err := decodeEnvelope(s.session, p.GetData(), s.c.opts.MaxEventBytes)
	if err != nil {
		return opened{}, err
	}
	o := opened{env: env}
	o.stream, o.n, o.counts = parseLive(string(counter))
	return o, nil
}

// open checks one received message where the subscription decrypts itself
// (Encryption) or accepts only plaintext (neither Encryption nor Decoder).
func (s *natsSub) open(r received) (opened, error) {
	opts := &s.c.opts
	if len(r.data) > opts.MaxEventBytes+sealOverhead {
		return opened{}, reject(ReasonTooLarge, "message of %d bytes is over the %d-byte bound", len(r.data), opts.MaxEventBytes)
	}
	f, p := classify(r.data)
	switch {
	case f == formJSON && (opts.Encryption == nil || opts.AcceptPlaintext):
		return s.openPlain(r)
	case f == formJSON:
		return opened{}, reject(ReasonPlaintext, "plaintext event on an encrypted channel")
	case f == formEncrypted && opts.Encryption == nil:
		return opened{}, reject(ReasonEncrypted, "encrypted event, and this subscriber holds no keys")
	case f == formEncrypted:
		plain, err := opts.Encryption.Decode([]*commonpb.Payload{p})
		if err != nil {
			return opened{}, reject(ReasonDecrypt, "event does not decrypt with the keyring")
		}
		return s.openDecrypted(plain[0])
	}
	return opened{}, reject(ReasonMalformed, "message is not an event")
}

// parseLive reads a "<stream> <n>" counter.
func parseLive(v string) (stream string, n uint64, ok bool) {
	stream, num, ok := strings.Cut(v, " ")
	if !ok || stream == "" || len(stream) > maxStreamID {
		return "", 0, false
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil || n == 0 {
		return "", 0, false
	}
	return stream, n, true
}
