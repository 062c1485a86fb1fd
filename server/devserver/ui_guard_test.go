package devserver

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
)

// The DNS rebinding attack on the Web UI: a page whose name was made to
// resolve to 127.0.0.1 reads a workflow's history through the UI's API,
// or terminates it. Its Host is refused with 403 before the UI runs; a
// cross-origin POST is refused too. The same requests for the UI's own
// address, for localhost, or for a configured name are served.
func TestWebUIRefusesRebinding(t *testing.T) {
	s := StartForTest(t, Config{UIPort: AnyPort, UIAllowedHosts: []string{"ui.internal"}})
	ctx := t.Context()
	c, err := s.Dial(ctx, client.Options{})
	require.NoError(t, err)
	defer c.Close()
	// No worker: the workflow stays running, its history one event long.
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "rebind", TaskQueue: "nobody"}, "Nothing")
	require.NoError(t, err)

	base := "http://" + s.UIAddress()
	history := "/api/v1/namespaces/" + s.Namespace() + "/workflows/rebind/run/" + run.GetRunID() + "/history.json"
	hc := &http.Client{Timeout: 10 * time.Second}
	do := func(method, path, host string, headers map[string]string, body string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
		require.NoError(t, err)
		if host != "" {
			req.Host = host
		}
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := hc.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}

	for _, path := range []string{"/api/v1/settings", history, "/namespaces/default/workflows"} {
		for _, host := range []string{"rb.example", "rb.example:8233", "10.0.0.1:8233"} {
			resp, body := do(http.MethodGet, path, host, nil, "")
			require.Equal(t, http.StatusForbidden, resp.StatusCode, "GET %s, Host %s: %s", path, host, body)
			require.True(t, strings.HasPrefix(body, "host_not_allowed: "), body)
			require.NotContains(t, body, "WorkflowExecutionStarted")
		}
		for _, host := range []string{"", "localhost", "ui.internal:8233"} {
			resp, body := do(http.MethodGet, path, host, nil, "")
			require.Equal(t, http.StatusOK, resp.StatusCode, "GET %s, Host %q: %s", path, host, body)
			require.Equal(t, "SAMEORIGIN", resp.Header.Get("X-Frame-Options"), "the UI frames its own pages, no one else's")
			require.Contains(t, resp.Header.Values("Content-Security-Policy"), uiContentSecurityPolicy)
		}
	}
	_, body := do(http.MethodGet, history, "", nil, "")
	require.Contains(t, body, "WorkflowExecutionStarted", "the history API answers on the UI's own address")

	// A cross-origin POST (a form on another site) cannot terminate the
	// workflow, even with a CSRF cookie and token it made up.
	terminate := "/api/v1/namespaces/" + url.PathEscape(s.Namespace()) + "/workflows/rebind/terminate"
	forged := map[string]string{"Origin": "https://evil.example", "Content-Type": "text/plain",
		"Cookie": "_csrf=0123456789abcdef0123456789abcdef", "X-CSRF-Token": "0123456789abcdef0123456789abcdef"}
	resp, body := do(http.MethodPost, terminate, "", forged, `{"reason":"rebind"}`)
	require.Equal(t, http.StatusForbidden, resp.StatusCode, body)
	require.True(t, strings.HasPrefix(body, "origin_not_allowed: "), body)
	desc, err := c.DescribeWorkflowExecution(ctx, "rebind", "")
	require.NoError(t, err)
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, desc.GetWorkflowExecutionInfo().GetStatus())

	// The UI's own page does it: same origin, with the CSRF cookie the UI
	// set and its token.
	resp, _ = do(http.MethodGet, "/", "", nil, "")
	var token string
	for _, ck := range resp.Cookies() {
		if ck.Name == "_csrf" {
			token = ck.Value
		}
	}
	require.NotEmpty(t, token, "the UI set no CSRF cookie")
	resp, body = do(http.MethodPost, terminate, "", map[string]string{"Origin": base, "Sec-Fetch-Site": "same-origin",
		"Content-Type": "application/json", "Cookie": "_csrf=" + token, "X-CSRF-Token": token}, `{"reason":"from the UI"}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	desc, err = c.DescribeWorkflowExecution(ctx, "rebind", "")
	require.NoError(t, err)
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, desc.GetWorkflowExecutionInfo().GetStatus())
}

// A UIAllowedHosts entry that is not a host name is refused at start.
func TestWebUIAllowedHostsChecked(t *testing.T) {
	_, err := Config{UIAllowedHosts: []string{"ui.internal:8233"}}.withDefaults()
	require.ErrorContains(t, err, "ui.internal:8233")
}
