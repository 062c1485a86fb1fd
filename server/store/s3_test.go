package store

import (
	"bytes"
	"context"
	"net/http/httptest"
	"sync"
	"syscall"
	"testing"

	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"google.golang.org/protobuf/proto"

	"github.com/keelrun/keel/claimcheck"
	"github.com/keelrun/keel/server/store/storetest"
)

// fakeS3 serves the S3 protocol in process and returns its backend, its
// server and a store URL for bucket "keel" on it.
func fakeS3(t *testing.T) (*s3mem.Backend, *httptest.Server, string) {
	t.Helper()
	return storetest.S3(t, nil)
}

func TestS3(t *testing.T) {
	ctx := context.Background()
	backend, srv, rawURL := fakeS3(t)
	s := open(t, rawURL)
	require.NoError(t, s.Check(ctx))

	key, err := s.Put(ctx, []byte("over the wire"))
	require.NoError(t, err)
	again, err := s.Put(ctx, []byte("over the wire"))
	require.NoError(t, err)
	require.Equal(t, key, again)
	got, err := s.Get(ctx, key)
	require.NoError(t, err)
	require.Equal(t, []byte("over the wire"), got)

	_, err = s.Get(ctx, claimcheck.KeyOf([]byte("never stored")))
	require.ErrorIs(t, err, ErrNotFound)

	c := NewCodec(s, CodecOptions{})
	large := jsonPayload(t, 100<<10)
	encoded, err := c.Encode([]*commonpb.Payload{large})
	require.NoError(t, err)
	require.True(t, claimcheck.IsReference(encoded[0]))
	decoded, err := c.Decode(encoded)
	require.NoError(t, err)
	require.True(t, proto.Equal(large, decoded[0]))

	// Replace the object behind the store's back. It is deleted first so
	// that the fake forgets the checksum of the original upload, which the
	// AWS SDK would otherwise check before the store does.
	damaged := []byte("not what was written")
	path := prefix + key.Digest()
	_, err = backend.DeleteObject("keel", path)
	require.NoError(t, err)
	_, err = backend.PutObject("keel", path, map[string]string{}, bytes.NewReader(damaged), int64(len(damaged)), nil)
	require.NoError(t, err)
	_, err = s.Get(ctx, key)
	require.ErrorIs(t, err, ErrCorrupt)

	srv.Close()
	// The SDK retries with backoff (gocloud fixes its retryer, so the
	// environment cannot shorten it); the calls run side by side so that
	// the test waits for one backoff, not four.
	errs := make([]error, 4)
	var wg sync.WaitGroup
	wg.Go(func() { _, errs[0] = s.Put(ctx, []byte("after the server is gone")) })
	wg.Go(func() { _, errs[1] = s.Get(ctx, key) })
	wg.Go(func() { _, errs[2] = c.Decode(encoded) })
	wg.Go(func() { errs[3] = s.Check(ctx) })
	wg.Wait()
	for _, err := range errs {
		require.ErrorIs(t, err, ErrUnreachable)
		require.ErrorIs(t, err, syscall.ECONNREFUSED, "the cause is kept")
	}
	require.ErrorContains(t, errs[0], s.URL())
}

func TestS3MissingBucket(t *testing.T) {
	ctx := context.Background()
	_, _, rawURL := fakeS3(t)
	s := open(t, "s3://absent"+rawURL[len("s3://keel"):])

	require.ErrorIs(t, s.Check(ctx), ErrUnreachable)
	_, err := s.Put(ctx, []byte("v"))
	require.ErrorIs(t, err, ErrUnreachable)
	_, err = s.Get(ctx, claimcheck.KeyOf([]byte("v")))
	require.ErrorIs(t, err, ErrUnreachable, "a missing bucket is not a missing value")
	require.NotErrorIs(t, err, ErrNotFound)
}
