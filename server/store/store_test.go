package store

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelrun/keel/claimcheck"
)

func TestStore(t *testing.T) {
	for _, tc := range []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"mem", func(*testing.T) string { return "mem://" }},
		{"file", func(t *testing.T) string { return "file://" + filepath.ToSlash(t.TempDir()) + "/blobs" }},
		{"path", func(t *testing.T) string { return filepath.Join(t.TempDir(), "blobs") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := open(t, tc.url(t))
			value := []byte("a value worth keeping out of a history")

			key, err := s.Put(ctx, value)
			require.NoError(t, err)
			require.Equal(t, claimcheck.KeyOf(value), key, "the key is the hash of the bytes")
			require.True(t, strings.HasPrefix(string(key), "sha256:"))

			again, err := s.Put(ctx, append([]byte(nil), value...))
			require.NoError(t, err, "storing the same bytes again succeeds")
			require.Equal(t, key, again)

			got, err := s.Get(ctx, key)
			require.NoError(t, err)
			require.Equal(t, value, got)

			other, err := s.Put(ctx, []byte("another value"))
			require.NoError(t, err)
			require.NotEqual(t, key, other)

			missing := claimcheck.KeyOf([]byte("never stored"))
			_, err = s.Get(ctx, missing)
			require.ErrorIs(t, err, ErrNotFound)
			require.ErrorContains(t, err, string(missing))
			require.ErrorContains(t, err, s.URL())

			_, err = s.Get(ctx, "sha256:../../etc/passwd")
			require.ErrorIs(t, err, ErrInvalidKey)
		})
	}
}

func TestFileCorruption(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, "file://"+filepath.ToSlash(dir))
	key, err := s.Put(ctx, []byte("the original bytes"))
	require.NoError(t, err)

	path := filepath.Join(dir, "keel", "sha256", key.Digest())
	require.FileExists(t, path)
	require.NoError(t, os.WriteFile(path, []byte("the damaged bytes!"), 0o644))

	_, err = s.Get(ctx, key)
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, string(key))
}

func TestFileLayout(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "not", "yet")
	s := open(t, "file://"+filepath.ToSlash(dir))
	key, err := s.Put(context.Background(), []byte("v"))
	require.NoError(t, err)

	var files []string
	require.NoError(t, filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, path)
			files = append(files, filepath.ToSlash(rel))
		}
		return err
	}))
	require.Equal(t, []string{"keel/sha256/" + key.Digest()}, files,
		"one file per value: no attribute sidecars or leftover temporary files")
}

func TestClosedStore(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, "mem://")
	require.NoError(t, err)
	key, err := s.Put(ctx, []byte("v"))
	require.NoError(t, err)
	require.NoError(t, s.Close())

	_, err = s.Put(ctx, []byte("w"))
	require.ErrorIs(t, err, ErrUnreachable)
	_, err = s.Get(ctx, key)
	require.ErrorIs(t, err, ErrUnreachable)
	require.ErrorIs(t, s.Check(ctx), ErrUnreachable)
}

func TestOpenRejects(t *testing.T) {
	for _, tc := range []struct {
		name, url, secret string
	}{
		{"unknown scheme", "gs://bucket", ""},
		{"s3 without bucket", "s3://?region=us-east-1", ""},
		{"user info", "s3://AKIA:hunter2@bucket?region=us-east-1", "hunter2"},
		{"secret parameter", "s3://bucket?region=us-east-1&secret_access_key=hunter2", "hunter2"},
		{"unknown driver parameter", "file:///tmp/x?colour=blue", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Open(context.Background(), tc.url)
			require.ErrorIs(t, err, ErrInvalidURL)
			if tc.secret != "" {
				require.NotContains(t, err.Error(), tc.secret)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"s3://bucket?endpoint=http%3A%2F%2Fminio%3A9000&region=us-east-1", "s3://bucket?endpoint=http%3A%2F%2Fminio%3A9000&region=us-east-1"},
		{"s3://key:secret@bucket?region=r", "s3://bucket?region=r"},
		{"s3://bucket?region=r&secret_access_key=s&session_token=t&Password=p", "s3://bucket?region=r"},
	} {
		u, err := parseURL(tc.in)
		require.NoError(t, err)
		require.Equal(t, tc.want, claimcheck.RedactURL(u))
	}
}

func TestParseKey(t *testing.T) {
	good := string(claimcheck.KeyOf([]byte("x")))
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{good, true},
		{strings.ToUpper(good[:7]) + good[7:], false},
		{"sha256:" + strings.ToUpper(good[7:]), false},
		{good[:len(good)-1], false},
		{good[:len(good)-1] + "g", false},
		{"md5:" + good[7:], false},
		{"", false},
	} {
		_, err := claimcheck.ParseKey(tc.in)
		if tc.ok {
			require.NoError(t, err, tc.in)
		} else {
			require.ErrorIs(t, err, ErrInvalidKey, tc.in)
		}
	}
}
