package store

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/keelrun/keel/claimcheck"
)

const uiOrigin = "http://localhost:8233"

// codecServer serves h and counts the requests it gets.
func codecServer(t *testing.T, h http.Handler) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func TestRemoteCodec(t *testing.T) {
	worker := NewCodec(open(t, "mem://"), CodecOptions{})
	srv, requests := codecServer(t, worker.Handler(HandlerOptions{AllowOrigin: uiOrigin}))
	client := converter.NewCodecDataConverter(converter.GetDefaultDataConverter(),
		claimcheck.NewRemoteCodec(srv.URL+"/", claimcheck.RemoteOptions{}))

	value := strings.Repeat("a long tool result ", 500)
	ref, err := NewDataConverter(worker).ToPayload(value)
	require.NoError(t, err)
	require.True(t, claimcheck.IsReference(ref))
	var got string
	require.NoError(t, client.FromPayload(ref, &got))
	require.Equal(t, value, got)
	require.EqualValues(t, 1, requests.Load())

	// Plain payloads never reach the endpoint, either way.
	plain, err := client.ToPayload(value)
	require.NoError(t, err)
	require.False(t, claimcheck.IsReference(plain), "clients do not offload")
	require.NoError(t, client.FromPayload(plain, &got))
	require.Equal(t, value, got)
	require.EqualValues(t, 1, requests.Load())

	// Several references in one batch take one request and keep their places.
	small, large := jsonPayload(t, 5), jsonPayload(t, 20<<10)
	encoded, err := worker.Encode([]*commonpb.Payload{small, large, small, ref})
	require.NoError(t, err)
	decoded, err := claimcheck.NewRemoteCodec(srv.URL, claimcheck.RemoteOptions{}).Decode(encoded)
	require.NoError(t, err)
	require.EqualValues(t, 2, requests.Load())
	require.Same(t, small, decoded[0])
	require.True(t, proto.Equal(large, decoded[1]))
	require.Same(t, small, decoded[2])
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(decoded[3], &got))
	require.Equal(t, value, got)
}

func TestRemoteCodecFailures(t *testing.T) {
	worker := NewCodec(open(t, "mem://"), CodecOptions{})
	ref, err := worker.PutPayload(t.Context(), jsonPayload(t, 1))
	require.NoError(t, err)
	key, _, err := claimcheck.ParseReference(ref)
	require.NoError(t, err)
	refs := []*commonpb.Payload{ref}

	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	_, err = claimcheck.NewRemoteCodec(gone.URL, claimcheck.RemoteOptions{}).Decode(refs)
	require.ErrorIs(t, err, ErrUnreachable)
	require.ErrorContains(t, err, "store: decode claim-check "+string(key)+" through codec endpoint "+gone.URL+": ")

	// An endpoint whose store lacks the value.
	other, _ := codecServer(t, NewCodec(open(t, "mem://"), CodecOptions{}).Handler(HandlerOptions{}))
	_, err = claimcheck.NewRemoteCodec(other.URL, claimcheck.RemoteOptions{}).Decode(refs)
	require.ErrorIs(t, err, ErrEndpoint)
	require.ErrorContains(t, err, ErrNotFound.Error())

	// An endpoint with no claim-check codec echoes the reference.
	echo, _ := codecServer(t, converter.NewPayloadCodecHTTPHandler())
	_, err = claimcheck.NewRemoteCodec(echo.URL, claimcheck.RemoteOptions{}).Decode(refs)
	require.ErrorIs(t, err, ErrEndpoint)
	require.ErrorContains(t, err, "undecoded")
}

func TestHandlerCORS(t *testing.T) {
	c := NewCodec(open(t, "mem://"), CodecOptions{})
	for _, tc := range []struct {
		name, allow, origin, method string
		wantStatus                  int
		wantOrigin                  string
	}{
		{"preflight from the UI", uiOrigin, uiOrigin, http.MethodOptions, http.StatusNoContent, uiOrigin},
		{"preflight from elsewhere", uiOrigin, "http://evil.example", http.MethodOptions, http.StatusNoContent, ""},
		{"preflight, any origin", "*", "http://anywhere.example", http.MethodOptions, http.StatusNoContent, "*"},
		{"decode from the UI", uiOrigin, uiOrigin, http.MethodPost, http.StatusOK, uiOrigin},
		{"decode from elsewhere", uiOrigin, "http://evil.example", http.MethodPost, http.StatusForbidden, ""},
		{"decode without CORS", "", uiOrigin, http.MethodPost, http.StatusForbidden, ""},
		{"decode, any origin", "*", "http://anywhere.example", http.MethodPost, http.StatusOK, "*"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := loopbackRequest(tc.method, "/codec/decode", `{"payloads":[]}`)
			req.Header.Set("Origin", tc.origin)
			req.Header.Set("Content-Type", "application/json")
			if tc.method == http.MethodOptions {
				req.Header.Set("Access-Control-Request-Method", http.MethodPost)
				req.Header.Set("Access-Control-Request-Headers", "content-type,x-namespace")
			}
			rec := httptest.NewRecorder()
			c.Handler(HandlerOptions{AllowOrigin: tc.allow}).ServeHTTP(rec, req)
			require.Equal(t, tc.wantStatus, rec.Code, rec.Body.String())
			require.Equal(t, tc.wantOrigin, rec.Header().Get("Access-Control-Allow-Origin"))
			if tc.wantOrigin != "" {
				require.Equal(t, "Content-Type, X-Namespace, Authorization", rec.Header().Get("Access-Control-Allow-Headers"))
				require.Contains(t, rec.Header().Get("Access-Control-Allow-Methods"), "POST")
			}
		})
	}
}
