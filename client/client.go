// Package client is keel's Go SDK: open a session, send prompts, follow a
// run's events live from the durable log (and its deltas from the live
// channel), read its authoritative outcome, inspect state and history;
// steer, answer and cancel a run; fork and rewind a session; manage
// schedules (Temporal Schedules); shut keel down and move idle sessions
// to a new build.
//
// Handles are cheap values. Closing or dropping one never cancels a run:
// runs are durable and outlive clients; cancelling is always explicit.
// The package's Example shows a whole exchange; `go test` compiles it.
package client

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	tlog "go.temporal.io/sdk/log"

	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/claimcheck"
	"github.com/keelrun/keel/connect"
	"github.com/keelrun/keel/live"
)

// Options configures a Client. Every field is optional.
type Options struct {
	// HostPort of the Temporal frontend. Default: $TEMPORAL_ADDRESS, the
	// address of the Temporal configuration profile, else "localhost:7233".
	HostPort string
	// Namespace. Default: $TEMPORAL_NAMESPACE, the profile's, else
	// "default" ("default" with Options.Temporal).
	Namespace string
	// APIKey for Temporal (Temporal Cloud's, say), sent as a bearer token;
	// it turns TLS on. Default: $TEMPORAL_API_KEY, else the profile's.
	APIKey string
	// TLS of the connection: the server's CA, a client certificate and key
	// for mutual TLS, the server's name. Default: as $TEMPORAL_TLS* and the
	// profile say.
	TLS *connect.TLS
	// Profile and ConfigFile pick the profile of Temporal's configuration
	// file that fills in what the fields above and the environment leave
	// unset. Default: $TEMPORAL_PROFILE or "default", in
	// $TEMPORAL_CONFIG_FILE or the user's temporalio/temporal.toml.
	Profile    string
	ConfigFile string
	// IgnoreEnvironment reads neither the environment variables nor the
	// configuration file (package connect says which).
	IgnoreEnvironment bool
	// Temporal is an existing Temporal client to use instead of dialing;
	// Close does not close it, and the connection fields above are unused.
	Temporal client.Client
	// Live is the live channel for deltas. Without it, event streams carry
	// durable events only. With it, an event stream subscribes to it, and
	// so does Session.Send, for the run's first stream (see Send).
	Live live.Channel
	// LiveBuffer is how many deltas a stream holds for a reader that falls
	// behind before it reports a *live.LaggedError. Default
	// live.DefaultBuffer.
	LiveBuffer int
	// Logger for the Temporal client, in the Temporal SDK's interface:
	// log.NewStructuredLogger over an *slog.Logger, or logging.Temporal
	// over keel's zap logger. Default: warnings to stderr.
	Logger tlog.Logger
	// Config holds the defaults of new sessions (model, tools, ...).
	Config api.RunConfig
	// HandOver bounds what new sessions keep in memory between
	// executions. Optional; the defaults of api.HandOverLimits.
	HandOver api.HandOverLimits
	// DataConverter decodes what workers wrote. Workers move large values
	// to a content store and leave references in Temporal; give the client
	// a converter whose codec can read them: store.NewDataConverter over
	// the workers' store, or over claimcheck.NewRemoteCodec for keel's codec
	// endpoint. With Options.Temporal it must be that client's converter.
	// Where workers encrypt (package crypt), a client that sends prompts
	// encrypts them too: store.CodecOptions.Encryption, or the crypt codec
	// after the remote one in converter.NewCodecDataConverter.
	// Optional; default: Temporal's, asking the codec endpoint at
	// $KEEL_CODEC_ENDPOINT, else the one `keel dev` recorded on the
	// Temporal server when that is on this machine (LearnCodecEndpoint),
	// else DefaultCodecEndpoint (keel dev's default), for values that were
	// moved to the store or encrypted, and for nothing else; it sends what
	// it writes unencrypted.
	DataConverter converter.DataConverter
	// Attachments writes what Attach stores to the workers' content
	// store: a store.Codec over it, or claimcheck.NewRemoteCodec with
	// EncodeRemotely for a codec endpoint. Optional; default: with
	// DataConverter unset, the codec endpoint the client reads through;
	// else none, and Attach fails.
	Attachments converter.PayloadCodec
}

// DefaultCodecEndpoint is where `keel dev` serves its content store's codec
// endpoint, which a client without Options.DataConverter reads large
// values through.
const DefaultCodecEndpoint = "http://127.0.0.1:7280/codec"

// EnvCodecEndpoint names the environment variable that overrides
// DefaultCodecEndpoint.
const EnvCodecEndpoint = "KEEL_CODEC_ENDPOINT"

// defaultDataConverter is Temporal's converter with a remote codec that
// decodes content-store references through endpoint.
func defaultDataConverter(endpoint string) converter.DataConverter {
	return claimcheck.NewRemoteDataConverter(endpoint)
}

// Client talks to keel through Temporal.
type Client struct {
	tc        client.Client
	namespace string
	live      live.Channel
	liveBuf   int
	owned     bool
	config    api.RunConfig
	handOver  api.HandOverLimits
	dc        converter.DataConverter
	attach    converter.PayloadCodec
}

// Dial connects to Temporal as opts say, with Temporal's environment
// variables and configuration profile for what they leave unset. A failure
// to connect is a *connect.DialError that says why when it can tell (the
// server requires a client certificate, say).
func Dial(ctx context.Context, opts Options) (*Client, error) {
	endpoint := os.Getenv(EnvCodecEndpoint)
	if opts.DataConverter == nil && opts.Temporal != nil {
		// The converter must be opts.Temporal's; this is the best guess.
		opts.DataConverter = defaultDataConverter(cmp.Or(endpoint, DefaultCodecEndpoint))
		opts.Attachments = cmp.Or(opts.Attachments, defaultAttachments(cmp.Or(endpoint, DefaultCodecEndpoint)))
	}
	c := &Client{namespace: opts.Namespace, live: opts.Live, liveBuf: opts.LiveBuffer, config: opts.Config,
		handOver: opts.HandOver, dc: opts.DataConverter, tc: opts.Temporal, attach: opts.Attachments}
	if c.tc != nil {
		if c.namespace == "" {
			c.namespace = connect.DefaultNamespace
		}
		return c, nil
	}
	conn := opts.Connection()
	resolved, err := conn.Resolve()
	if err != nil {
		return nil, fmt.Errorf("keel: %w", err)
	}
	logger := opts.Logger
	if logger == nil {
		logger = tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	}
	if opts.DataConverter == nil {
		if endpoint == "" {
			// A keel dev on another --http-port says where its codec
			// endpoint is; a server it cannot reach fails the same here.
			if endpoint, err = LearnCodecEndpoint(ctx, conn, logger); err != nil {
				return nil, fmt.Errorf("keel: %w", err)
			}
		}
		opts.DataConverter = defaultDataConverter(cmp.Or(endpoint, DefaultCodecEndpoint))
		c.dc = opts.DataConverter
		if c.attach == nil {
			c.attach = defaultAttachments(cmp.Or(endpoint, DefaultCodecEndpoint))
		}
	}
	tc, err := connect.Dial(ctx, conn, client.Options{
		Logger: logger, DataConverter: opts.DataConverter,
	})
	if err != nil {
		return nil, fmt.Errorf("keel: %w", err)
	}
	c.tc, c.owned, c.namespace = tc, true, resolved.Namespace
	return c, nil
}

// Connection returns the connection fields of opts.
func (opts Options) Connection() connect.Options {
	return connect.Options{HostPort: opts.HostPort, Namespace: opts.Namespace, APIKey: opts.APIKey, TLS: opts.TLS,
		Profile: opts.Profile, ConfigFile: opts.ConfigFile, IgnoreEnvironment: opts.IgnoreEnvironment}
}

// Namespace is the namespace the client works in.
func (c *Client) Namespace() string { return c.namespace }

// Close releases the client's connection (not an Options.Temporal client,
// nor the live channel). Runs go on.
func (c *Client) Close() {
	if c.owned {
		c.tc.Close()
	}
}

// Temporal returns the underlying Temporal client.
func (c *Client) Temporal() client.Client { return c.tc }

// Session returns a handle on the session with this ID. No call is made:
// the session is created by its first Send.
func (c *Client) Session(id string) *Session { return &Session{c: c, id: id} }

// NewSession returns a handle on a session with a fresh random ID.
func (c *Client) NewSession() *Session { return c.Session("s-" + newID()[:12]) }
