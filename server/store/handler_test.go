package store

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// loopbackRequest is a request as the server hands it to a handler for a
// connection to 127.0.0.1:7280 naming that address in Host.
func loopbackRequest(method, path, body string) *http.Request {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Host = "127.0.0.1:7280"
	return req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey,
		&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7280}))
}

// statusRecorder serves h and remembers the status it answered with.
func statusRecorder(h http.Handler, status *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &recordStatus{ResponseWriter: w, status: status}
		h.ServeHTTP(rec, r)
	})
}

type recordStatus struct {
	http.ResponseWriter
	status *atomic.Int64
}

func (r *recordStatus) WriteHeader(code int) {
	r.status.Store(int64(code))
	r.ResponseWriter.WriteHeader(code)
}

func post(t *testing.T, url string, headers map[string]string, body io.Reader) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, body)
	require.NoError(t, err)
	for k, v := range headers {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// The DNS rebinding attack on the codec endpoint: a page whose name
// resolves to 127.0.0.1 posts references to /decode to read them. Its
// Host is refused; the endpoint's own address and configured names work.
func TestHandlerRefusesRebinding(t *testing.T) {
	srv := httptest.NewServer(NewCodec(open(t, "mem://"), CodecOptions{}).Handler(HandlerOptions{AllowedHosts: []string{"codec.internal"}}))
	defer srv.Close()
	json := map[string]string{"Content-Type": "application/json"}
	for _, host := range []string{"rb.example", "rb.example:7280", "10.0.0.1"} {
		resp, body := post(t, srv.URL+"/decode", map[string]string{"Host": host, "Content-Type": "application/json"}, strings.NewReader(`{"payloads":[]}`))
		require.Equal(t, http.StatusForbidden, resp.StatusCode, "Host %s: %s", host, body)
		require.True(t, strings.HasPrefix(body, "host_not_allowed: "), body)
		require.Equal(t, "DENY", resp.Header.Get("X-Frame-Options"))
	}
	for _, host := range []string{"", "localhost", "codec.internal:7281"} {
		h := map[string]string{"Host": host, "Content-Type": "application/json"}
		if host == "" {
			h = json
		}
		resp, body := post(t, srv.URL+"/decode", h, strings.NewReader(`{"payloads":[]}`))
		require.Equal(t, http.StatusOK, resp.StatusCode, "Host %q: %s", host, body)
		require.Contains(t, resp.Header.Values("Content-Security-Policy"), "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	}
}

// A page on another origin posts a text/plain body to /encode (a blind
// write into the content store) or /decode: refused before the codec
// runs, so the store stays empty. The same body from a program (no
// Origin) but not declared JSON gets 415.
func TestHandlerRefusesCrossOriginPost(t *testing.T) {
	dir := t.TempDir()
	st := open(t, "file://"+dir)
	srv := httptest.NewServer(NewCodec(st, CodecOptions{}).Handler(HandlerOptions{AllowOrigin: uiOrigin}))
	defer srv.Close()
	big := `{"payloads":[{"metadata":{"encoding":"anNvbi9wbGFpbg=="},"data":"` + strings.Repeat("QUFB", 4<<10) + `"}]}`
	for _, h := range []map[string]string{
		{"Origin": "https://evil.example", "Content-Type": "text/plain"},
		{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site", "Content-Type": "application/json"},
		{"Origin": "http://127.0.0.1:1", "Sec-Fetch-Site": "same-site", "Content-Type": "text/plain"},
	} {
		resp, body := post(t, srv.URL+"/encode", h, strings.NewReader(big))
		require.Equal(t, http.StatusForbidden, resp.StatusCode, "%v: %s", h, body)
		require.True(t, strings.HasPrefix(body, "origin_not_allowed: "), body)
	}
	resp, body := post(t, srv.URL+"/encode", map[string]string{"Content-Type": "text/plain"}, strings.NewReader(big))
	require.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode, body)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "a refused request wrote to the store")

	// The Web UI's origin, and programs, encode.
	resp, body = post(t, srv.URL+"/encode", map[string]string{"Origin": uiOrigin, "Sec-Fetch-Site": "same-site", "Content-Type": "application/json"}, strings.NewReader(big))
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	resp, body = post(t, srv.URL+"/encode", map[string]string{"Content-Type": "application/json; charset=utf-8"}, strings.NewReader(big))
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
}

// zeros is an endless body that counts the bytes taken from it.
type zeros struct{ n, max atomic.Int64 }

func (z *zeros) Read(p []byte) (int, error) {
	if z.n.Load() >= z.max.Load() {
		return 0, io.EOF
	}
	clear(p)
	z.n.Add(int64(len(p)))
	return len(p), nil
}

// A 2 GB body, declared or streamed, is refused with 413 once it is over
// the limit: the endpoint never reads it all (the client's writes stop
// when the server closes the connection).
func TestHandlerBodyCap(t *testing.T) {
	const twoGB = 2 << 30
	var status atomic.Int64
	srv := httptest.NewServer(statusRecorder(NewCodec(open(t, "mem://"), CodecOptions{}).Handler(HandlerOptions{}), &status))
	defer srv.Close()
	for _, declared := range []bool{true, false} {
		status.Store(0)
		body := &zeros{}
		body.max.Store(twoGB)
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/decode", body)
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		if declared {
			req.ContentLength = twoGB
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			// The server answered before the client stopped writing.
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, string(b))
		}
		require.EqualValues(t, http.StatusRequestEntityTooLarge, status.Load(), "declared %v: the handler's answer", declared)
		require.Less(t, body.n.Load(), int64(DefaultMaxHandlerBodyBytes+64<<20), "declared %v: the client sent most of the body", declared)
	}

	small := httptest.NewServer(NewCodec(open(t, "mem://"), CodecOptions{}).Handler(HandlerOptions{MaxBodyBytes: 64}))
	defer small.Close()
	resp, body := post(t, small.URL+"/decode", map[string]string{"Content-Type": "application/json"},
		strings.NewReader(`{"payloads":[`+strings.Repeat(`{},`, 30)+`{}]}`))
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, body)
	require.Contains(t, body, "over 64 bytes")
	resp, body = post(t, small.URL+"/decode", map[string]string{"Content-Type": "application/json"}, strings.NewReader(`{"payloads":[]}`))
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
}

// A codec endpoint other machines can reach needs a token.
func TestCheckListen(t *testing.T) {
	for _, c := range []struct {
		addr  string
		token bool
		err   error
	}{
		{"127.0.0.1:7281", false, nil},
		{"localhost:7281", false, nil},
		{"[::1]:7281", false, nil},
		{"0.0.0.0:7281", false, ErrNoToken},
		{":7281", false, ErrNoToken},
		{"192.168.1.5:7281", false, ErrNoToken},
		{"0.0.0.0:7281", true, nil},
	} {
		err := CheckListen(c.addr, c.token)
		require.True(t, errors.Is(err, c.err) || (err == nil && c.err == nil), "CheckListen(%q, %v) = %v", c.addr, c.token, err)
	}
	require.Error(t, CheckListen("nowhere", false))
}

// Options that are not hosts or origins are refused by Validate, and
// Handler will not serve them.
func TestHandlerOptionsValidate(t *testing.T) {
	require.NoError(t, HandlerOptions{AllowOrigin: uiOrigin, AllowedHosts: []string{"codec.internal"}}.Validate())
	require.Error(t, HandlerOptions{AllowedHosts: []string{"codec.internal:7281"}}.Validate())
	require.Error(t, HandlerOptions{AllowOrigin: "localhost:8233"}.Validate())
	require.Panics(t, func() {
		NewCodec(open(t, "mem://"), CodecOptions{}).Handler(HandlerOptions{AllowOrigin: "localhost:8233"})
	})
}
