package devserver

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestWebUI(t *testing.T) {
	s := StartForTest(t, Config{UIPort: AnyPort})
	require.NotEmpty(t, s.UIAddress())
	base := "http://" + s.UIAddress()
	hc := &http.Client{Timeout: 10 * time.Second}
	get := func(path string) (*http.Response, string) {
		t.Helper()
		resp, err := hc.Get(base + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "GET %s: %s", path, body)
		return resp, string(body)
	}

	// The single-page app: any UI route serves its index page.
	resp, page := get("/namespaces/default/workflows")
	require.Contains(t, resp.Header.Get("Content-Type"), "text/html")
	require.Contains(t, strings.ToLower(page), "<!doctype html")

	_, body := get("/api/v1/settings")
	var settings struct{ DefaultNamespace string }
	require.NoError(t, json.Unmarshal([]byte(body), &settings))
	require.Equal(t, s.Namespace(), settings.DefaultNamespace)

	// The UI's API is proxied to the embedded frontend.
	_, body = get("/api/v1/namespaces/" + s.Namespace())
	var described struct {
		NamespaceInfo struct{ Name string } `json:"namespaceInfo"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &described), body)
	require.Equal(t, s.Namespace(), described.NamespaceInfo.Name)

	require.NoError(t, s.Stop())
	l, err := net.Listen("tcp", s.UIAddress())
	require.NoError(t, err, "the UI port is still bound after Stop")
	require.NoError(t, l.Close())
}
