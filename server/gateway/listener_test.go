package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/internal/httpguard"
	"github.com/keelrun/keel/server/gateway"
)

// A page on another origin drives a key-less gateway through the
// browser with requests that need no preflight: a text/plain or form
// POST of a prompt, a POST to cancel. Each is refused and changes
// nothing; the same requests from the gateway's own origin, or from a
// program (no Origin), go through.
func TestCrossOriginPostRefused(t *testing.T) {
	s := startGateway(t, gateway.Options{})
	m := model(t, `{"turns":[{"text":["hi"]}]}`)
	prompt := `{"prompt":"hi","model":"` + m + `"}`
	for _, h := range []map[string]string{
		{"Origin": "https://evil.example", "Content-Type": "text/plain"},
		{"Origin": "https://evil.example", "Content-Type": "application/x-www-form-urlencoded"},
		{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site", "Content-Type": "text/plain"},
		{"Origin": "http://127.0.0.1:1", "Sec-Fetch-Site": "same-site", "Content-Type": "text/plain"},
	} {
		r := rawCall(t, s, http.MethodPost, "/v1/sessions/xorigin/runs", prompt, h).must(t, http.StatusForbidden)
		if r.code() != gateway.CodeOriginNotAllowed {
			t.Fatalf("%v: %s", h, r.raw)
		}
		rawCall(t, s, http.MethodPost, "/v1/sessions/xorigin/cancel", "", h).must(t, http.StatusForbidden)
	}
	s.call(t, http.MethodGet, "/v1/sessions/xorigin", nil).must(t, http.StatusNotFound)

	own := map[string]string{"Origin": s.srv.URL, "Sec-Fetch-Site": "same-origin", "Content-Type": "application/json"}
	rawCall(t, s, http.MethodPost, "/v1/sessions/xorigin/runs", prompt, own).must(t, http.StatusAccepted)
	rawCall(t, s, http.MethodPost, "/v1/sessions/xorigin/cancel", "", own).must(t, http.StatusAccepted)
	rawCall(t, s, http.MethodPost, "/v1/sessions/xorigin/cancel", "", nil).must(t, http.StatusAccepted)
}

// A body not declared application/json gets 415 unsupported_media_type
// before it is read, on every route that takes one, and changes nothing:
// it is what a cross-origin "simple" request carries.
func TestBodyMustBeJSON(t *testing.T) {
	s := startGateway(t, gateway.Options{})
	m := model(t, `{"turns":[{"text":["hi"]}]}`)
	prompt := `{"prompt":"hi","model":"` + m + `"}`
	for _, ct := range []string{"", "text/plain", "text/plain; charset=utf-8", "application/x-www-form-urlencoded",
		"multipart/form-data; boundary=x", "application/json; charset=latin1"} {
		for _, path := range []string{"/v1/sessions/media/runs", "/v1/sessions/media/steer", "/v1/sessions/media/respond", "/v1/ag-ui"} {
			body := prompt
			if path == "/v1/ag-ui" {
				body = `{"threadId":"media","runId":"r1","messages":[{"id":"1","role":"user","content":"hi"}]}`
			}
			r := rawCall(t, s, http.MethodPost, path, body, map[string]string{"Content-Type": ct}).must(t, http.StatusUnsupportedMediaType)
			if r.code() != gateway.CodeUnsupportedMediaType || !strings.Contains(r.body["message"].(string), "application/json") {
				t.Fatalf("POST %s as %q: %s", path, ct, r.raw)
			}
		}
	}
	s.call(t, http.MethodGet, "/v1/sessions/media", nil).must(t, http.StatusNotFound)
	rawCall(t, s, http.MethodPost, "/v1/sessions/media/runs", prompt, map[string]string{"Content-Type": "application/json; charset=UTF-8"}).
		must(t, http.StatusAccepted)
}

// rawCall sends body as it is, with exactly the given headers.
func rawCall(t *testing.T, s *stack, method, path, body string, headers map[string]string) reply {
	t.Helper()
	h := map[string]string{}
	for k, v := range headers {
		h[k] = v
	}
	if _, ok := h["Content-Type"]; !ok && body != "" {
		h["Content-Type"] = "application/json"
	}
	req, err := http.NewRequestWithContext(testCtx(t), method, s.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := reply{status: resp.StatusCode, header: resp.Header, raw: raw}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(raw, &out.body); err != nil {
			t.Fatalf("%s %s: %v\n%s", method, path, err, raw)
		}
	}
	return out
}

// Every answer carries the security headers, the page's CSP among them:
// the page, its files, JSON answers, errors, refusals and event streams.
func TestSecurityHeaders(t *testing.T) {
	s := startGateway(t, gateway.Options{})
	s.send(t, "headers", map[string]any{"prompt": "hi", "model": model(t, `{"turns":[{"text":["hi"]}]}`)})
	check := func(what string, h http.Header) {
		t.Helper()
		if !slices.Contains(h.Values("Content-Security-Policy"), gateway.ContentSecurityPolicy) ||
			h.Get("X-Frame-Options") != "DENY" || h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("%s: headers %v", what, h)
		}
	}
	for _, path := range []string{"/", "/web/app.js", "/web/style.css", "/v1/openapi.json", "/v1/sessions/headers", "/v1/nothing"} {
		check("GET "+path, s.call(t, http.MethodGet, path, nil).header)
	}
	check("rebinding", s.callWith(t, http.MethodGet, "/", nil, map[string]string{"Host": "rb.example"}).must(t, http.StatusForbidden).header)
	st := s.stream(t, testCtx(t), "headers", "", nil)
	check("event stream", st.resp.Header)
	st.until(t, keel.TypeRunCompleted)
}

// Served by httpguard.NewServer with read and write timeouts far shorter
// than the run, an event stream follows the run to its end: its writes
// set their own deadlines, and the read timeout ends with the request.
// (The prompt goes through a gateway without short timeouts: the write
// timeout bounds an ordinary answer, and a loaded Temporal may take
// longer than that to accept a run.)
func TestStreamOutlivesServerTimeouts(t *testing.T) {
	const timeout = 200 * time.Millisecond
	sender := startGateway(t, gateway.Options{})
	gw, err := gateway.New(newClient(t, 0), gateway.Options{Logger: errorLogger(t), KeepAlive: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(gw)
	srv.Config = httpguard.NewServer(gw)
	srv.Config.ReadTimeout, srv.Config.WriteTimeout = timeout, timeout
	srv.Start()
	s := &stack{gw: gw, srv: srv}
	t.Cleanup(s.stop)

	chunks := make([]string, 12)
	for i := range chunks {
		chunks[i] = "word "
	}
	script := `{"chunk_delay":"100ms","turns":[{"text":["` + strings.Join(chunks, `","`) + `"]}]}`
	sender.send(t, "timeouts", map[string]any{"prompt": "hi", "model": model(t, script)})
	start := time.Now()
	st := s.stream(t, testCtx(t), "timeouts", "?after=0", nil)
	evs := st.until(t, keel.TypeRunCompleted)
	if d := time.Since(start); d < 4*timeout {
		t.Fatalf("the run took %v, not long enough to outlive the %v timeouts", d, timeout)
	}
	contiguous(t, durableSeqs(t, evs), 1)
}

// The page works under its Content-Security-Policy in a real browser (its
// style sheet applies, its script runs: it opens a session), and the
// policy holds: a script injected into the page inline, the payload of an
// XSS, does not run, and the page refuses to be framed (clickjacking its
// Approve and Cancel buttons).
func TestPageUnderContentSecurityPolicy(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a headless Chromium")
	}
	b := newBrowser(t)
	s := startGateway(t, gateway.Options{})
	b.do("load the page", chromedp.Navigate(s.srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#open-form")))
	if !eval[bool](b, `document.styleSheets.length > 0 && document.styleSheets[0].cssRules.length > 0`) {
		t.Fatal("the style sheet did not apply")
	}
	b.open("csp-page")
	if eval[bool](b, `(() => {
		window.injected = false;
		const s = document.createElement("script");
		s.textContent = "window.injected = true";
		document.body.append(s);
		return window.injected;
	})()`) {
		t.Fatal("an inline script injected into the page ran")
	}
	eval[bool](b, `(() => {
		const f = document.createElement("iframe");
		f.onload = () => {
			let framed = false;
			try { framed = !!(f.contentDocument && f.contentDocument.getElementById("open-form")); } catch {}
			window.framed = framed;
			window.frameLoaded = true;
		};
		f.src = "/";
		document.body.append(f);
		return true;
	})()`)
	poll[bool](b, "the frame's load", `window.frameLoaded === true`)
	if eval[bool](b, `window.framed`) {
		t.Fatal("the page loaded in a frame")
	}
}
