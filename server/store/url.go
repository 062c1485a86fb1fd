package store

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/memblob"
	"gocloud.dev/blob/s3blob"

	"github.com/keelrun/keel/claimcheck"
)

// parseURL turns what Open was given into a URL. A string without a scheme
// is a directory, so a config can say "./data/blobs".
func parseURL(raw string) (*url.URL, error) {
	if !strings.Contains(raw, "://") {
		abs, err := filepath.Abs(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: %q: %w", ErrInvalidURL, raw, err)
		}
		return &url.URL{Scheme: fileblob.Scheme, Path: filepath.ToSlash(abs)}, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse echoes its input, which may hold a secret.
		return nil, fmt.Errorf("%w: cannot parse the store URL", ErrInvalidURL)
	}
	return u, nil
}

// openBucket opens the bucket u names with one of the three supported
// drivers. Each call gets its own opener because s3blob's opener keeps
// per-URL options in itself.
func openBucket(ctx context.Context, u *url.URL, safe string) (*blob.Bucket, error) {
	if u.User != nil {
		return nil, fmt.Errorf("%w: %s: credentials in the URL are not supported; "+
			"use the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) or a profile", ErrInvalidURL, safe)
	}
	for name := range u.Query() {
		if claimcheck.SecretParam(name) {
			return nil, fmt.Errorf("%w: %s: query parameter %q looks like a credential; "+
				"use the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) or a profile", ErrInvalidURL, safe, name)
		}
	}
	var (
		b   *blob.Bucket
		err error
	)
	switch u.Scheme {
	case fileblob.Scheme:
		b, err = (&fileblob.URLOpener{}).OpenBucketURL(ctx, fileDefaults(u))
	case s3blob.Scheme:
		if u.Host == "" {
			return nil, fmt.Errorf("%w: %s: no bucket name", ErrInvalidURL, safe)
		}
		b, err = (&s3blob.URLOpener{}).OpenBucketURL(ctx, u)
	case memblob.Scheme:
		b, err = (&memblob.URLOpener{}).OpenBucketURL(ctx, u)
	default:
		return nil, fmt.Errorf("%w: %s: scheme %q is not one of file, s3, mem", ErrInvalidURL, safe, u.Scheme)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalidURL, safe, err)
	}
	return b, nil
}

// fileDefaults fills in fileblob parameters the caller did not set: create
// the directory, write temporary files beside their final name (so the
// rename that publishes a value is atomic and never crosses file systems),
// and skip the attribute sidecar files, which content-addressed values do
// not need.
func fileDefaults(u *url.URL) *url.URL {
	c := *u
	q := c.Query()
	for name, value := range map[string]string{"create_dir": "true", "no_tmp_dir": "true", "metadata": "skip"} {
		if _, set := q[name]; !set {
			q.Set(name, value)
		}
	}
	c.RawQuery = q.Encode()
	return &c
}
