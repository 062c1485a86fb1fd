package main

import (
	"cmp"
	"context"
	"fmt"
	"os"

	"go.temporal.io/sdk/converter"
	tlog "go.temporal.io/sdk/log"

	"github.com/keelrun/keel/claimcheck"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/connect"
	"github.com/keelrun/keel/crypt"
	"github.com/keelrun/keel/server/store"
)

// Content-store defaults: `keel dev` serves its codec endpoint here, so a
// command on the same machine reads the values its worker moved to the
// store without being told where the store is.
const (
	defaultHTTPPort      = 7280
	defaultCodecEndpoint = client.DefaultCodecEndpoint
	envStore             = "KEEL_STORE"
	envCodecEndpoint     = client.EnvCodecEndpoint
)

// storeFlags say how a command reads (and a worker writes) the values that
// workers keep in the content store.
type storeFlags struct {
	url      string
	endpoint string
	// endpointNamed says --codec-endpoint or $KEEL_CODEC_ENDPOINT named
	// the endpoint ("" then means none); otherwise learnEndpoint finds it.
	endpointNamed bool
	keyFile       string
	// allowPlaintext is --encryption-allow-plaintext (workers only).
	allowPlaintext bool
	worker         bool
}

func (s *storeFlags) register(fs *flagSet, worker bool) {
	s.worker = worker
	fs.StringVar(&s.url, "store", os.Getenv(envStore),
		"content store `URL` for large values: file:///DIR, s3://BUCKET?endpoint=…&region=…, mem:// (default $"+envStore+")")
	if !worker {
		s.endpoint = os.Getenv(envCodecEndpoint)
		s.endpointNamed = s.endpoint != ""
		fs.Func("codec-endpoint",
			"`URL` of a codec endpoint that reads the content store (and decrypts, without --encryption-key-file) when --store is not given; \"\" for none (default $"+envCodecEndpoint+", else the one keel dev on this machine recorded on its Temporal server, else "+defaultCodecEndpoint+")",
			func(v string) error {
				s.endpoint, s.endpointNamed = v, true
				return nil
			})
	}
	registerKeyFile(fs, &s.keyFile)
	if worker {
		registerAllowPlaintext(fs, &s.allowPlaintext)
	}
}

// learnEndpoint fills in the codec endpoint of a reader that was not told
// one and reads no --store: the one keel dev recorded on the Temporal
// server at conn when that is on this machine (client.LearnCodecEndpoint
// says what it trusts), else keel dev's default. A server it cannot reach
// is an error, the one the command's own dial would meet.
func (s *storeFlags) learnEndpoint(ctx context.Context, conn connect.Options, logger tlog.Logger) error {
	if s.worker || s.url != "" || s.endpointNamed {
		return nil
	}
	learned, err := client.LearnCodecEndpoint(ctx, conn, logger)
	if err != nil {
		return err
	}
	s.endpoint, s.endpointNamed = cmp.Or(learned, defaultCodecEndpoint), true
	return nil
}

// contentStore is what a command uses of the content store.
type contentStore struct {
	// dc is the data converter of the command's Temporal client.
	dc converter.DataConverter
	// attach stores what client.Attach stores: the store's codec with
	// --store, else the codec endpoint, asked to encode (keel dev's
	// stores an attachment in its store, encrypted if it encrypts); nil
	// for a worker or without an endpoint.
	attach converter.PayloadCodec
	// codec is set with --store: a worker needs it for its segments.
	codec *store.Codec
	// where says which store, without secrets, for the worker's banner.
	where string
	// keys are the encryption keys, nil without --encryption-key-file.
	keys  *crypt.Keyring
	close func()
}

// open returns what the command uses of the content store. Without
// --store a reader decodes through the codec endpoint, asked only for
// values that were moved to the store; a worker then keeps everything in
// Temporal.
func (s *storeFlags) open(ctx context.Context) (*contentStore, error) {
	cs := &contentStore{dc: converter.GetDefaultDataConverter(), close: func() {}}
	// A worker (and keel codec, which decodes for it) accepts only
	// ciphertext unless told otherwise: whoever writes to Temporal without
	// the keys must not hand it input. A reader only shows what it reads,
	// and through a codec endpoint it gets back plaintext the endpoint
	// decrypted, so it accepts both.
	enc, keys, err := loadEncryption(s.keyFile, s.allowPlaintext || !s.worker)
	if err != nil {
		return nil, err
	}
	cs.keys = keys
	if s.url == "" {
		// Encrypt, then offload: on the way back references resolve first
		// (the SDK decodes with the codecs in order), then payloads decrypt.
		if s.worker && enc != nil {
			// Query arguments may come in the clear (crypt.ReadOnly).
			cs.dc = crypt.NewDataConverter(enc)
			return cs, nil
		}
		var codecs []converter.PayloadCodec
		if !s.worker && s.endpoint != "" {
			codecs = append(codecs, claimcheck.NewRemoteCodec(s.endpoint, claimcheck.RemoteOptions{
				DecryptLocally: enc != nil, EncodeRemotely: enc == nil, ModifyRequest: withCodecToken}))
			// An attachment goes to the store whatever the command
			// encrypts itself: the endpoint stores it (and encrypts it
			// as its workers do), which only it can do without --store.
			cs.attach = claimcheck.NewRemoteCodec(s.endpoint, claimcheck.RemoteOptions{
				EncodeRemotely: true, ModifyRequest: withCodecToken})
		}
		if enc != nil {
			codecs = append(codecs, enc)
		}
		if len(codecs) > 0 {
			cs.dc = converter.NewCodecDataConverter(cs.dc, codecs...)
		}
		return cs, nil
	}
	st, err := store.Open(ctx, s.url)
	if err != nil {
		return nil, fmt.Errorf("content store: %w", err)
	}
	if s.worker {
		// A worker writes: refuse to start on a store it cannot reach
		// rather than fail the first large value of some run.
		if err := st.Check(ctx); err != nil {
			_ = st.Close()
			return nil, fmt.Errorf("content store: %w", err)
		}
	}
	opts := store.CodecOptions{}
	if enc != nil {
		opts.Encryption = enc
	}
	cs.codec = store.NewCodec(st, opts)
	cs.dc, cs.where, cs.attach = store.NewDataConverter(cs.codec), st.URL(), cs.codec
	cs.close = func() { _ = st.Close() }
	return cs, nil
}
