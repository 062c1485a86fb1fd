package claimcheck

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"github.com/keelrun/keel/crypt"
)

// DefaultRemoteTimeout bounds a request to a codec endpoint when
// RemoteOptions sets neither Client nor Timeout.
const DefaultRemoteTimeout = 30 * time.Second

// RemoteOptions configures NewRemoteCodec.
type RemoteOptions struct {
	// Client sends the requests; nil means a client with Timeout.
	Client *http.Client
	// Timeout bounds a request when Client is nil. Zero means
	// DefaultRemoteTimeout.
	Timeout time.Duration
	// ModifyRequest, if set, edits each request before it is sent, for
	// example to add authentication or an X-Namespace header.
	ModifyRequest func(*http.Request) error
	// DecryptLocally leaves encrypted payloads (crypt.IsEncrypted)
	// to a codec after this one, for readers that hold the key file:
	// only references are sent, and what they resolve to may come back
	// encrypted. By default encrypted payloads are sent too, so a reader
	// without keys reads through an endpoint that has them.
	DecryptLocally bool
	// EncodeRemotely makes Encode send payloads to endpoint + "/encode",
	// for writers without the key file: what they send reaches the
	// workers as the workers write it themselves (encrypted, large values
	// in the store), which is what an encrypting worker accepts. An
	// endpoint that cannot be reached (no keel dev on the default port,
	// say) is asked once: payloads then go as they are, and a worker that
	// encrypts refuses them (crypt.ErrPlaintext).
	EncodeRemotely bool
}

// remoteCodec decodes references through a codec endpoint (store.Codec.Handler)
// for processes that cannot reach the store themselves.
type remoteCodec struct {
	endpoint string // without credentials, for messages
	remote   converter.PayloadCodec
	decrypt  bool // send encrypted payloads for the endpoint to decrypt
	encode   bool // encode through the endpoint
	// unreachable is set once an encode request could not reach the
	// endpoint: later payloads go as they are, without a request each.
	unreachable atomic.Bool
}

// NewRemoteCodec returns a PayloadCodec for clients that cannot reach the
// store: Decode sends only claim-check references and encrypted payloads
// (see RemoteOptions.DecryptLocally) to endpoint + "/decode" (other
// payloads never cause a request). Encode changes nothing, because
// offloading and encrypting are the workers' job, unless
// RemoteOptions.EncodeRemotely asks the endpoint to do it.
func NewRemoteCodec(endpoint string, opts RemoteOptions) converter.PayloadCodec {
	endpoint = strings.TrimSuffix(endpoint, "/")
	safe := endpoint
	if u, err := url.Parse(endpoint); err == nil {
		safe = RedactURL(u)
	}
	client := opts.Client
	if client == nil {
		timeout := opts.Timeout
		if timeout <= 0 {
			timeout = DefaultRemoteTimeout
		}
		client = &http.Client{Timeout: timeout}
	}
	return &remoteCodec{
		endpoint: safe,
		decrypt:  !opts.DecryptLocally,
		encode:   opts.EncodeRemotely,
		remote: converter.NewRemotePayloadCodec(converter.RemotePayloadCodecOptions{
			Endpoint:      endpoint,
			ModifyRequest: opts.ModifyRequest,
			Client:        *client,
		}),
	}
}

// Encode returns payloads unchanged, or with RemoteOptions.EncodeRemotely
// as the endpoint encodes them.
func (r *remoteCodec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	if !r.encode || len(payloads) == 0 || r.unreachable.Load() {
		return payloads, nil
	}
	encoded, err := r.remote.Encode(payloads)
	if err != nil {
		var transport *url.Error
		if errors.As(err, &transport) {
			r.unreachable.Store(true)
			return payloads, nil
		}
		return nil, &detailError{
			msg:   fmt.Sprintf("store: encode %d payload(s) through codec endpoint %s", len(payloads), r.endpoint),
			kind:  ErrEndpoint,
			cause: err,
		}
	}
	if len(encoded) != len(payloads) {
		return nil, &detailError{
			msg:   fmt.Sprintf("store: encode through codec endpoint %s", r.endpoint),
			kind:  ErrEndpoint,
			cause: fmt.Errorf("sent %d payloads, got %d back", len(payloads), len(encoded)),
		}
	}
	return encoded, nil
}

// Decode resolves the references among payloads in one request.
func (r *remoteCodec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	var refs []*commonpb.Payload
	var at []int
	for i, p := range payloads {
		if IsReference(p) || (r.decrypt && crypt.IsEncrypted(p)) {
			refs = append(refs, p)
			at = append(at, i)
		}
	}
	if len(refs) == 0 {
		return payloads, nil
	}
	decoded, err := r.remote.Decode(refs)
	kind := ErrEndpoint
	if err != nil {
		var transport *url.Error
		if errors.As(err, &transport) {
			kind = ErrUnreachable
		}
		return nil, r.fail(refs, kind, err)
	}
	out := append([]*commonpb.Payload(nil), payloads...)
	for j, p := range decoded {
		if IsReference(p) {
			// An endpoint without a claim-check codec echoes references.
			return nil, r.fail(refs[j:j+1], ErrEndpoint, errors.New("the endpoint returned it undecoded"))
		}
		if r.decrypt && crypt.IsEncrypted(p) {
			return nil, r.fail(refs[j:j+1], ErrEndpoint, errors.New("the endpoint returned it encrypted: it holds no key for it (or give this reader the key file)"))
		}
		out[at[j]] = p
	}
	return out, nil
}

// fail names the first reference of a failed request and how many others
// went with it.
func (r *remoteCodec) fail(refs []*commonpb.Payload, kind, cause error) error {
	name := "(malformed reference)"
	if key, _, err := ParseReference(refs[0]); err == nil {
		name = "claim-check " + string(key)
	} else if crypt.IsEncrypted(refs[0]) {
		name = "(an encrypted payload)"
	}
	if n := len(refs) - 1; n > 0 {
		name = fmt.Sprintf("%s (and %d more)", name, n)
	}
	return &detailError{
		msg:   fmt.Sprintf("store: decode %s through codec endpoint %s", name, r.endpoint),
		kind:  kind,
		cause: cause,
	}
}

// NewRemoteDataConverter returns Temporal's default data converter that
// decodes references through the codec endpoint at endpoint (see
// NewRemoteCodec), for readers that cannot reach the store.
func NewRemoteDataConverter(endpoint string) converter.DataConverter {
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(),
		NewRemoteCodec(endpoint, RemoteOptions{}))
}
