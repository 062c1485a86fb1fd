package store

import (
	"bytes"
	"crypto/rand"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/keelrun/keel/claimcheck"
	"github.com/keelrun/keel/crypt"
)

func testKeys(t *testing.T, id string) *crypt.Codec {
	t.Helper()
	key := make([]byte, crypt.KeySize)
	_, err := rand.Read(key)
	require.NoError(t, err)
	return crypt.NewCodec(crypt.NewKeyring(id, key))
}

// requireNoMarker fails if any file under dir holds marker.
func requireNoMarker(t *testing.T, dir, marker string) int {
	t.Helper()
	files := 0
	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		require.False(t, bytes.Contains(b, []byte(marker)), "%s holds the plaintext", path)
		files++
		return nil
	}))
	return files
}

// Encrypt, then offload: small payloads become ciphertext in place, large
// ones ciphertext in the store behind a reference; the store's objects
// hold no plaintext, and Decode gives back the originals.
func TestCodecEncryptsThenOffloads(t *testing.T) {
	dir := t.TempDir()
	st := open(t, "file://"+dir)
	c := NewCodec(st, CodecOptions{Encryption: testKeys(t, "k1")})
	const marker = "marker-5b1c9e"
	small, err := converter.GetDefaultDataConverter().ToPayload(marker)
	require.NoError(t, err)
	large, err := converter.GetDefaultDataConverter().ToPayload(strings.Repeat(marker+" ", 4000))
	require.NoError(t, err)

	enc, err := c.Encode([]*commonpb.Payload{small, large})
	require.NoError(t, err)
	require.True(t, crypt.IsEncrypted(enc[0]), "small payloads are encrypted in place")
	require.True(t, claimcheck.IsReference(enc[1]), "large payloads are offloaded")
	seg, err := c.PutPayload(t.Context(), small)
	require.NoError(t, err)
	for _, p := range append(enc, seg) {
		b, _ := proto.Marshal(p)
		require.False(t, bytes.Contains(b, []byte(marker)))
	}
	// The large value's chunks and node, and the segment.
	require.GreaterOrEqual(t, requireNoMarker(t, dir, marker), len(chunks(mustMarshal(t, storedPayload(t, c, enc[1]))))+2,
		"the large value (chunks and a root) and the segment are stored")

	dec, err := c.Decode(append(enc, seg))
	require.NoError(t, err)
	for i, want := range []*commonpb.Payload{small, large, small} {
		require.True(t, proto.Equal(want, dec[i]), "payload %d", i)
	}
	// A codec over the same store without the key resolves references
	// to ciphertext, never to plaintext.
	plain, err := NewCodec(st, CodecOptions{}).Decode(enc)
	require.NoError(t, err)
	require.True(t, crypt.IsEncrypted(plain[0]) && crypt.IsEncrypted(plain[1]))
	// Encoding a reference again leaves it a reference.
	again, err := c.Encode(enc[1:])
	require.NoError(t, err)
	require.True(t, proto.Equal(enc[1], again[0]))
}

// A reader without keys decodes through an endpoint that has them; one
// with the keys asks the endpoint only for references; an endpoint
// without keys is a clear error for the first reader.
func TestRemoteCodecDecrypts(t *testing.T) {
	keys := testKeys(t, "k1")
	st := open(t, "mem://")
	worker := NewCodec(st, CodecOptions{Encryption: keys})
	withKeys, _ := codecServer(t, worker.Handler(HandlerOptions{}))
	noKeys, _ := codecServer(t, NewCodec(st, CodecOptions{}).Handler(HandlerOptions{}))
	small, large := jsonPayload(t, 10), jsonPayload(t, 20<<10)
	enc, err := worker.Encode([]*commonpb.Payload{small, large})
	require.NoError(t, err)

	dec, err := claimcheck.NewRemoteCodec(withKeys.URL, claimcheck.RemoteOptions{}).Decode(enc)
	require.NoError(t, err)
	require.True(t, proto.Equal(small, dec[0]) && proto.Equal(large, dec[1]))

	local, n := codecServer(t, NewCodec(st, CodecOptions{}).Handler(HandlerOptions{}))
	dc := converter.NewCodecDataConverter(converter.GetDefaultDataConverter(),
		claimcheck.NewRemoteCodec(local.URL, claimcheck.RemoteOptions{DecryptLocally: true}), keys)
	var got string
	require.NoError(t, dc.FromPayload(enc[1], &got))
	require.Len(t, got, 20<<10)
	require.NoError(t, dc.FromPayload(enc[0], &got))
	require.EqualValues(t, 1, n.Load(), "only the reference went to the endpoint")

	_, err = claimcheck.NewRemoteCodec(noKeys.URL, claimcheck.RemoteOptions{}).Decode(enc[:1])
	require.ErrorIs(t, err, ErrEndpoint)
	require.ErrorContains(t, err, "encrypted")
}

func TestHandlerToken(t *testing.T) {
	h := NewCodec(open(t, "mem://"), CodecOptions{}).Handler(HandlerOptions{AllowOrigin: uiOrigin, Token: "s3cret"})
	for _, tc := range []struct {
		name, method, auth string
		want               int
	}{
		{"preflight needs none", http.MethodOptions, "", http.StatusNoContent},
		{"none", http.MethodPost, "", http.StatusUnauthorized},
		{"wrong", http.MethodPost, "Bearer nope", http.StatusUnauthorized},
		{"not bearer", http.MethodPost, "Basic s3cret", http.StatusUnauthorized},
		{"right", http.MethodPost, "Bearer s3cret", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := loopbackRequest(tc.method, "/decode", `{"payloads":[]}`)
			req.Header.Set("Origin", uiOrigin)
			req.Header.Set("Content-Type", "application/json")
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			require.Equal(t, tc.want, rec.Code, rec.Body.String())
			require.Equal(t, "true", rec.Header().Get("Access-Control-Allow-Credentials"))
			require.NotContains(t, rec.Body.String(), "s3cret")
		})
	}
}

// A writer without keys encodes through an endpoint that has them: what
// it sends is ciphertext a worker decodes (and nothing in it is the
// text), large values land in the store; an endpoint that cannot be
// reached is asked once and payloads then go as they are.
func TestRemoteCodecEncodesForKeylessWriters(t *testing.T) {
	keys := testKeys(t, "k1")
	st := open(t, "mem://")
	worker := NewCodec(st, CodecOptions{Encryption: keys})
	srv, n := codecServer(t, worker.Handler(HandlerOptions{}))
	small, large := jsonPayload(t, 10), jsonPayload(t, 20<<10)

	writer := claimcheck.NewRemoteCodec(srv.URL, claimcheck.RemoteOptions{EncodeRemotely: true})
	enc, err := writer.Encode([]*commonpb.Payload{small, large})
	require.NoError(t, err)
	require.True(t, crypt.IsEncrypted(enc[0]), "a small value comes back encrypted")
	require.True(t, claimcheck.IsReference(enc[1]), "a large value comes back a reference")
	require.NotContains(t, string(enc[0].GetData()), string(small.GetData()))
	dec, err := worker.Decode(enc)
	require.NoError(t, err)
	require.True(t, proto.Equal(small, dec[0]) && proto.Equal(large, dec[1]))

	// Without EncodeRemotely nothing is sent.
	before := n.Load()
	same, err := claimcheck.NewRemoteCodec(srv.URL, claimcheck.RemoteOptions{}).Encode([]*commonpb.Payload{small})
	require.NoError(t, err)
	require.True(t, proto.Equal(small, same[0]))
	require.Equal(t, before, n.Load())

	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	offline := claimcheck.NewRemoteCodec(gone.URL, claimcheck.RemoteOptions{EncodeRemotely: true})
	for range 2 {
		out, err := offline.Encode([]*commonpb.Payload{small})
		require.NoError(t, err)
		require.True(t, proto.Equal(small, out[0]))
	}

	// An endpoint that answers with an error is an error, not plaintext.
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no", http.StatusInternalServerError)
	}))
	defer broken.Close()
	_, err = claimcheck.NewRemoteCodec(broken.URL, claimcheck.RemoteOptions{EncodeRemotely: true}).Encode([]*commonpb.Payload{small})
	require.ErrorIs(t, err, ErrEndpoint)
}

// storedPayload is the payload (here ciphertext) a reference names.
func storedPayload(t *testing.T, c *Codec, ref *commonpb.Payload) *commonpb.Payload {
	t.Helper()
	key, _, err := claimcheck.ParseReference(ref)
	require.NoError(t, err)
	data, err := c.store.getValue(t.Context(), key)
	require.NoError(t, err)
	var p commonpb.Payload
	require.NoError(t, proto.Unmarshal(data, &p))
	return &p
}
