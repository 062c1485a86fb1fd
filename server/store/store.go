package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/keelrun/keel/claimcheck"
)

// prefix is where values live inside the bucket, so a store can share a
// bucket with other data and a later hash function can sit beside sha256.
const prefix = "keel/sha256/"

// Store is a content-addressed store of immutable values in a blob bucket.
// It is safe for concurrent use.
type Store struct {
	bucket *blob.Bucket
	url    string // without secrets
	fresh  freshKeys
}

// Open opens the store at rawURL:
//
//	file:///abs/dir                  a directory, created if missing
//	./rel/dir                        the same, for a path without a scheme
//	s3://bucket?region=R             S3 or an S3-compatible service; add
//	  &endpoint=http://host:9000     endpoint and use_path_style=true for
//	  &use_path_style=true           MinIO or GCS's S3 interface
//	mem://                           memory, for tests (each Open is a
//	                                 new, empty store)
//
// S3 credentials come from the AWS environment variables, shared config or
// a profile (profile=NAME); credentials in the URL are refused, so that the
// URL can be logged. Open does not contact the store; see Check.
func Open(ctx context.Context, rawURL string) (*Store, error) {
	u, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	safe := claimcheck.RedactURL(u)
	b, err := openBucket(ctx, u, safe)
	if err != nil {
		return nil, err
	}
	return &Store{bucket: b, url: safe}, nil
}

// URL returns the store's URL without credentials, for logs.
func (s *Store) URL() string { return s.url }

// Close releases the bucket. Later calls fail with ErrUnreachable.
func (s *Store) Close() error {
	if err := s.bucket.Close(); err != nil {
		return fmt.Errorf("store: close %s: %w", s.url, err)
	}
	return nil
}

// Check reports whether the store can be reached, so a process can refuse
// to start with a misconfigured store instead of failing its first large
// payload.
func (s *Store) Check(ctx context.Context) error {
	ok, err := s.bucket.IsAccessible(ctx)
	if err == nil && !ok {
		err = errors.New("bucket does not exist")
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrUnreachable, s.url, err)
	}
	return nil
}

// Put stores data and returns its key. Storing bytes that are already
// there writes nothing (values are immutable, and the same bytes always
// have the same key) unless the object is older than RefreshAge: then it
// is written again, so that its modification time is recent and a
// collection (Collector) that began before this write, and has not seen
// the reference to it yet, leaves it alone (see DefaultGrace).
func (s *Store) Put(ctx context.Context, data []byte) (claimcheck.Key, error) {
	key := claimcheck.KeyOf(data)
	if s.fresh.recent(key) {
		return key, nil
	}
	path := prefix + key.Digest()
	attrs, err := s.bucket.Attributes(ctx, path)
	switch {
	case err == nil && time.Since(attrs.ModTime) < RefreshAge:
		s.fresh.add(key)
		return key, nil
	case err != nil && (gcerrors.Code(err) != gcerrors.NotFound || missingBucket(err)):
		return "", s.fail("put", key, err)
	}
	// Two writers racing on one key write identical bytes, so whichever
	// lands last changes nothing. WriteAll sends an MD5 the backend checks,
	// so a value damaged in transit is never published.
	opts := &blob.WriterOptions{ContentType: "application/octet-stream"}
	if err := s.bucket.WriteAll(ctx, path, data, opts); err != nil {
		return "", s.fail("put", key, err)
	}
	s.fresh.add(key)
	return key, nil
}

// Get returns the value stored under key after checking that it hashes to
// key. A missing value fails with ErrNotFound, a damaged one with
// ErrCorrupt.
func (s *Store) Get(ctx context.Context, key claimcheck.Key) ([]byte, error) {
	if _, err := claimcheck.ParseKey(string(key)); err != nil {
		return nil, err
	}
	r, err := s.bucket.NewReader(ctx, prefix+key.Digest(), nil)
	if err != nil {
		return nil, s.fail("get", key, err)
	}
	defer r.Close()
	if r.Size() > MaxValueBytes {
		return nil, fmt.Errorf("%w: %s in %s is %d bytes", ErrTooLarge, key, s.url, r.Size())
	}
	// The bound holds even if the object grew after its size was read.
	data, err := io.ReadAll(io.LimitReader(r, MaxValueBytes+1))
	if err != nil {
		return nil, s.fail("get", key, err)
	}
	if len(data) > MaxValueBytes {
		return nil, fmt.Errorf("%w: %s in %s is over %d bytes", ErrTooLarge, key, s.url, MaxValueBytes)
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != key.Digest() {
		return nil, fmt.Errorf("%w: get %s from %s: the %d bytes read hash to sha256:%s",
			ErrCorrupt, key, s.url, len(data), got)
	}
	return data, nil
}

// fail classifies a bucket error. Only a read of a missing object is
// ErrNotFound; every other failure, a missing bucket included, means the
// store could not do its job, which a caller must not mistake for an
// absent value.
func (s *Store) fail(op string, key claimcheck.Key, err error) error {
	kind, prep := ErrUnreachable, "from"
	if op == "put" {
		prep = "to"
	} else if gcerrors.Code(err) == gcerrors.NotFound && !missingBucket(err) {
		kind = ErrNotFound
	}
	return fmt.Errorf("%w: %s %s %s %s: %w", kind, op, key, prep, s.url, err)
}

// missingBucket reports whether an S3-protocol error says the bucket, not
// the object, is missing.
func missingBucket(err error) bool {
	var api interface{ ErrorCode() string }
	return errors.As(err, &api) && api.ErrorCode() == "NoSuchBucket"
}
