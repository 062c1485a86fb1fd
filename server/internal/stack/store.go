package stack

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/converter"

	"github.com/keelrun/keel/crypt"
	"github.com/keelrun/keel/server/store"
)

// StoreConfig says where a worker keeps large values and how payloads
// are encoded. The zero value keeps every value in Temporal, unencrypted.
type StoreConfig struct {
	// URL of the content store (file:///DIR, s3://BUCKET?…, mem://).
	// "": none, unless Codec.
	URL string
	// Check refuses a store that cannot be written, rather than failing
	// the first large value of some run: what a writer wants.
	Check bool
	// Encryption, when set, encrypts every payload before it is offloaded
	// (encrypt, then offload); without a store it encrypts in place.
	Encryption *crypt.Codec
	// Codec is an open content store's codec to use instead of URL (the
	// tests share one per server); the stack does not close it.
	Codec *store.Codec
}

// ContentStore is an opened StoreConfig.
type ContentStore struct {
	// Store is the store opened from URL, nil otherwise.
	Store *store.Store
	// Codec is the content store's codec, nil without a store.
	Codec *store.Codec
	// DataConverter is the Temporal clients' converter: over Codec, or
	// the encryption's alone, or nil for the SDK's default.
	DataConverter converter.DataConverter
}

// OpenStore opens what cfg names. Close releases it.
func OpenStore(ctx context.Context, cfg StoreConfig) (*ContentStore, error) {
	cs := &ContentStore{Codec: cfg.Codec}
	if cs.Codec == nil && cfg.URL != "" {
		st, err := store.Open(ctx, cfg.URL)
		if err == nil && cfg.Check {
			if err = st.Check(ctx); err != nil {
				_ = st.Close()
			}
		}
		if err != nil {
			return nil, fmt.Errorf("content store: %w", err)
		}
		opts := store.CodecOptions{}
		if cfg.Encryption != nil {
			opts.Encryption = cfg.Encryption
		}
		cs.Store, cs.Codec = st, store.NewCodec(st, opts)
	}
	switch {
	case cs.Codec != nil:
		cs.DataConverter = store.NewDataConverter(cs.Codec)
	case cfg.Encryption != nil:
		// Query arguments may come in the clear (crypt.ReadOnly).
		cs.DataConverter = crypt.NewDataConverter(cfg.Encryption)
	}
	return cs, nil
}

// Close closes the store OpenStore opened, if any.
func (cs *ContentStore) Close() error {
	if cs == nil || cs.Store == nil {
		return nil
	}
	return cs.Store.Close()
}
