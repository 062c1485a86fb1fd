package main

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"

	"github.com/keelrun/keel/server/telemetry"
)

// listenerCase is one of keel dev's listeners: a safe request and a
// state-changing one.
type listenerCase struct {
	name     string
	get      string // URL answered 200 on the listener's own address
	post     string // URL of a state-changing request
	postBody string
}

// rawDo makes a request with exactly these headers ("Host" sets the Host
// header) and returns the status and body.
func rawDo(t *testing.T, ctx context.Context, method, rawURL string, headers map[string]string, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, rawURL, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, rawURL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The DNS rebinding attack on every listener of keel dev (the HTTP API
// and page, the codec endpoint, the Web UI, /metrics) and of keel serve:
// a request naming rb.example in Host gets 403 host_not_allowed; a
// cross-origin text/plain POST gets 403 origin_not_allowed; the same
// requests from the listener's own address, from localhost, without an
// Origin, or for a name given with --allowed-host are served.
func TestDevListenersRefuseRebinding(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	ctx, cancel := context.WithTimeout(withNoInput(context.Background()), 3*time.Minute)
	defer cancel()
	hosts := []string{"keel.test"}
	tel, err := telemetry.Start(ctx, telemetry.Options{MetricsAddress: "127.0.0.1:0", MetricsAllowedHosts: hosts})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	stack, err := startDevStack(ctx, devConfig{workspace: t.TempDir(), logger: quietLogger(), logLevel: zapcore.ErrorLevel,
		telemetry: tel, allowedHosts: hosts})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stack.stop() }()
	if stack.uiURL() == "" {
		t.Fatal("keel dev started without its Web UI")
	}
	api := stack.gatewayURL()
	cases := []listenerCase{
		{"HTTP API", api + "/openapi.json", api + "/sessions/rebind/runs", `{"prompt":"hi"}`},
		{"web page", "http://" + stack.httpL.Addr().String() + "/", api + "/sessions/rebind/cancel", ""},
		{"codec endpoint", "", stack.codecURL + "/decode", `{"payloads":[]}`},
		{"Web UI", stack.uiURL() + "/api/v1/settings", stack.uiURL() + "/api/v1/namespaces/default/workflows/rebind/terminate", `{}`},
		{"metrics", tel.MetricsURL(), tel.MetricsURL(), ""},
	}

	// keel serve against the same server, its HTTP API a listener too.
	serveCtx, interrupt := context.WithCancel(ctx)
	defer interrupt()
	out, _, done := inBackground(t, ctx, "keel serve is up.", func(stdout, stderr io.Writer) int {
		return cmdServe(serveCtx, []string{"--address", stack.server.Address(), "--nats", "", "--codec-endpoint", stack.codecURL,
			"--http-port", "0", "--allowed-host", "keel.test"}, stdout, stderr)
	})
	m := regexp.MustCompile(`HTTP API   (http://127\.0\.0\.1:\d+/v1)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("keel serve's banner:\n%s", out.String())
	}
	cases = append(cases, listenerCase{"keel serve", m[1] + "/openapi.json", m[1] + "/sessions/rebind/runs", `{"prompt":"hi"}`})

	for _, c := range cases {
		target := c.get
		if target == "" {
			target = c.post
		}
		u, _ := url.Parse(target)
		method := http.MethodGet
		json := map[string]string{}
		if c.get == "" {
			method, json = http.MethodPost, map[string]string{"Content-Type": "application/json"}
		}
		with := func(extra map[string]string) map[string]string {
			h := map[string]string{}
			for k, v := range json {
				h[k] = v
			}
			for k, v := range extra {
				h[k] = v
			}
			return h
		}
		for _, host := range []string{"rb.example", "rb.example:" + u.Port(), "10.0.0.1:" + u.Port()} {
			status, body := rawDo(t, ctx, method, target, with(map[string]string{"Host": host}), c.postBody)
			if status != http.StatusForbidden || !strings.Contains(body, "host_not_allowed") {
				t.Errorf("%s, Host %s: %d %q, want 403 host_not_allowed", c.name, host, status, body)
			}
		}
		for _, host := range []string{"", "localhost:" + u.Port(), "keel.test:" + u.Port()} {
			h := with(nil)
			if host != "" {
				h["Host"] = host
			}
			if status, body := rawDo(t, ctx, method, target, h, c.postBody); status != http.StatusOK {
				t.Errorf("%s, Host %q: %d %q, want 200", c.name, host, status, body)
			}
		}
		status, body := rawDo(t, ctx, http.MethodPost, c.post, map[string]string{"Origin": "https://evil.example", "Content-Type": "text/plain"}, c.postBody)
		if status != http.StatusForbidden || !strings.Contains(body, "origin_not_allowed") {
			t.Errorf("%s: a cross-origin POST got %d %q, want 403 origin_not_allowed", c.name, status, body)
		}
	}
	// The Web UI's own origin calls the codec endpoint from the browser.
	status, body := rawDo(t, ctx, http.MethodPost, stack.codecURL+"/decode", map[string]string{"Origin": stack.uiURL(),
		"Sec-Fetch-Site": "same-site", "Content-Type": "application/json"}, `{"payloads":[]}`)
	if status != http.StatusOK {
		t.Errorf("the Web UI's origin at the codec endpoint: %d %q", status, body)
	}
	interrupt()
	if code := <-done; code != exitOK {
		t.Errorf("keel serve: exit %d", code)
	}
}

// --allowed-host takes host names only, refused at start with a usage
// error otherwise; keel codec applies it too.
func TestAllowedHostFlag(t *testing.T) {
	code, _, stderr := call(t, "codec", "--store", "mem://", "--allowed-host", "keel.test:7281")
	if code != exitUsage || !strings.Contains(stderr, "keel.test:7281") {
		t.Fatalf("codec --allowed-host with a port: exit %d, stderr %q", code, stderr)
	}
	var h hostsFlag
	for _, v := range []string{"a.test", "b.test, c.test", ""} {
		if err := h.Set(v); err != nil {
			t.Fatal(err)
		}
	}
	if got := h.String(); got != "a.test,b.test,c.test" {
		t.Fatalf("--allowed-host a.test --allowed-host 'b.test, c.test': %q", got)
	}
}
