package telemetry_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelrun/keel/server/telemetry"
)

// The DNS rebinding attack on /metrics: a page whose name was made to
// resolve to 127.0.0.1 reads the endpoint. Its Host is refused; the
// endpoint's own address, localhost and a configured scrape name are not.
// A cross-origin POST is refused too, and every answer carries the
// security headers.
func TestMetricsEndpointRefusesRebinding(t *testing.T) {
	tel, err := telemetry.Start(context.Background(), telemetry.Options{MetricsAddress: "127.0.0.1:0",
		MetricsAllowedHosts: []string{"keel-worker-1"}})
	require.NoError(t, err)
	defer func() { require.NoError(t, tel.Shutdown(context.Background())) }()
	get := func(method, host string, headers map[string]string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, tel.MetricsURL(), strings.NewReader("x"))
		require.NoError(t, err)
		if host != "" {
			req.Host = host
		}
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	for _, host := range []string{"rb.example", "rb.example:9464", "10.0.0.1:9464"} {
		resp, body := get(http.MethodGet, host, nil)
		require.Equal(t, http.StatusForbidden, resp.StatusCode, "Host %s", host)
		require.True(t, strings.HasPrefix(body, "host_not_allowed: "), body)
		require.NotContains(t, body, "go_goroutines")
	}
	for _, host := range []string{"", "localhost:9464", "keel-worker-1:9464"} {
		resp, body := get(http.MethodGet, host, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, "Host %q: %s", host, body)
		require.Contains(t, body, "go_goroutines")
		require.Equal(t, "DENY", resp.Header.Get("X-Frame-Options"))
		require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
		require.NotEmpty(t, resp.Header.Get("Content-Security-Policy"))
	}
	resp, body := get(http.MethodPost, "", map[string]string{"Origin": "https://evil.example", "Content-Type": "text/plain"})
	require.Equal(t, http.StatusForbidden, resp.StatusCode, body)
	require.True(t, strings.HasPrefix(body, "origin_not_allowed: "), body)

	_, err = telemetry.Start(context.Background(), telemetry.Options{MetricsAddress: "127.0.0.1:0",
		MetricsAllowedHosts: []string{"keel-worker-1:9464"}})
	require.ErrorContains(t, err, "keel-worker-1:9464")
}
