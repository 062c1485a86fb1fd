// Package storetest serves a real S3-protocol server (gofakes3) in process
// for tests of keel's content store, so they run without a cloud account
// or a MinIO binary.
package storetest

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// Bucket is the bucket S3 creates.
const Bucket = "keel"

// S3 starts an S3-protocol server holding Bucket, closed when tb ends, and
// returns its backend, its server and the store URL for the bucket. wrap,
// when set, stands in front of the server (to make it fail, say). The AWS
// credentials and configuration come from the environment only, set here,
// so a developer's ~/.aws cannot change a test.
func S3(tb testing.TB, wrap func(http.Handler) http.Handler) (*s3mem.Backend, *httptest.Server, string) {
	tb.Helper()
	none := filepath.Join(tb.TempDir(), "none")
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		"AWS_SESSION_TOKEN": "", "AWS_PROFILE": "", "AWS_CONFIG_FILE": none,
		"AWS_SHARED_CREDENTIALS_FILE": none, "AWS_EC2_METADATA_DISABLED": "true"} {
		tb.Setenv(k, v)
	}
	backend := s3mem.New()
	if err := backend.CreateBucket(Bucket); err != nil {
		tb.Fatalf("create bucket: %v", err)
	}
	var h http.Handler = gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog())).Server()
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	tb.Cleanup(srv.Close)
	q := url.Values{"endpoint": {srv.URL}, "region": {"us-east-1"}, "use_path_style": {"true"}}
	return backend, srv, "s3://" + Bucket + "?" + q.Encode()
}
