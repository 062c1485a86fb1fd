package httpguard

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// serve starts a guarded server on 127.0.0.1 whose handler answers "ok".
func serve(t *testing.T, opts Options) *httptest.Server {
	t.Helper()
	g, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "ok")
	})))
	t.Cleanup(srv.Close)
	return srv
}

type answer struct {
	status int
	header http.Header
	body   string
}

func do(t *testing.T, srv *httptest.Server, method string, headers map[string]string) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+"/x", strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b)}
}

// The DNS rebinding attack: a page on rb.example, its name made to
// resolve to 127.0.0.1, calls the listener with its own name as Host. It
// is refused; loopback names and the listener's own address are not, nor
// a name the operator allowed.
func TestRebindingHostRefused(t *testing.T) {
	srv := serve(t, Options{AllowedHosts: []string{"Keel.Example", "10.9.8.7", "[fd00::1]"}})
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	for _, host := range []string{"rb.example", "rb.example:" + strconv.Itoa(port), "sub.keel.example", "keel.example.rb.example",
		"10.0.0.1", "10.0.0.1:" + strconv.Itoa(port), "localhost.", "[fe80::1]", "keel.example.", "127.0.0.1.nip.io"} {
		a := do(t, srv, http.MethodGet, map[string]string{"Host": host})
		if a.status != http.StatusForbidden || !strings.HasPrefix(a.body, CodeHostNotAllowed+": ") {
			t.Errorf("Host %q: %d %q, want 403 %s", host, a.status, a.body, CodeHostNotAllowed)
		}
		if a.header.Get("X-Frame-Options") != FrameOptions || a.header.Get("Content-Security-Policy") == "" {
			t.Errorf("Host %q: the refusal lacks the security headers: %v", host, a.header)
		}
	}
	for _, host := range []string{"127.0.0.1:" + strconv.Itoa(port), "localhost:" + strconv.Itoa(port), "LOCALHOST", "[::1]:" + strconv.Itoa(port), "127.0.0.2",
		"keel.example", "KEEL.EXAMPLE:443", "10.9.8.7:80", "[fd00::1]:7280", "[::ffff:127.0.0.1]"} {
		if a := do(t, srv, http.MethodGet, map[string]string{"Host": host}); a.status != http.StatusOK {
			t.Errorf("Host %q: %d %q, want 200", host, a.status, a.body)
		}
	}

	// A JSON listener answers with the gateway's error body.
	js := serve(t, Options{JSON: true})
	a := do(t, js, http.MethodGet, map[string]string{"Host": "rb.example"})
	var body Error
	if a.status != http.StatusForbidden || json.Unmarshal([]byte(a.body), &body) != nil || body.Code != CodeHostNotAllowed ||
		!strings.HasPrefix(a.header.Get("Content-Type"), "application/json") {
		t.Fatalf("JSON listener: %d %q %v", a.status, a.body, a.header)
	}
}

// On a connection that arrived on another address (a listener on
// 0.0.0.0, reached at 192.168.1.5), that address is the listener's own;
// loopback names are not, since the connection is not on loopback.
func TestHostOnNonLoopbackConnection(t *testing.T) {
	g, err := New(Options{AllowedHosts: []string{"keel.internal"}})
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]bool{
		"192.168.1.5:7280": true, "192.168.1.5": true, "keel.internal:7280": true,
		"localhost:7280": false, "127.0.0.1:7280": false, "[::1]": false, "192.168.1.6": false, "rb.example": false,
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Host = host
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.ParseIP("192.168.1.5"), Port: 7280}))
		if got := g.Check(r) == nil; got != want {
			t.Errorf("Host %q on 192.168.1.5: allowed %v, want %v", host, got, want)
		}
	}
	// A dual-stack listener sees IPv4 clients as IPv4-mapped addresses.
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Host = "127.0.0.1:7280"
	r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.ParseIP("::ffff:127.0.0.1"), Port: 7280}))
	if e := g.Check(r); e != nil {
		t.Errorf("IPv4-mapped loopback: %v", e)
	}
	// Without a known local address only configured names pass.
	r = httptest.NewRequest(http.MethodGet, "/", nil)
	r.Host = "localhost"
	if g.Check(r) == nil {
		t.Error("localhost passed without a local address")
	}
}

// A web page on another origin posts a text/plain body (a "simple"
// request: no preflight) or a form: refused. The listener's own origin,
// programs without an Origin, a trusted origin and safe methods pass.
func TestCrossOriginPostRefused(t *testing.T) {
	const trusted = "http://127.0.0.1:8233"
	srv := serve(t, Options{TrustedOrigins: []string{trusted + "/"}})
	for name, h := range map[string]map[string]string{
		"evil origin, text/plain": {"Origin": "https://evil.example", "Content-Type": "text/plain"},
		"evil origin, form":       {"Origin": "https://evil.example", "Content-Type": "application/x-www-form-urlencoded"},
		"cross-site fetch":        {"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"},
		"same-site, other port":   {"Sec-Fetch-Site": "same-site", "Origin": "http://127.0.0.1:9999"},
		"null origin":             {"Origin": "null"},
	} {
		for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
			a := do(t, srv, method, h)
			if a.status != http.StatusForbidden || !strings.HasPrefix(a.body, CodeOriginNotAllowed+": ") {
				t.Errorf("%s %s: %d %q, want 403 %s", name, method, a.status, a.body, CodeOriginNotAllowed)
			}
		}
	}
	own := srv.URL
	for name, h := range map[string]map[string]string{
		"no origin (a program)": {},
		"own origin":            {"Origin": own},
		"same-origin fetch":     {"Sec-Fetch-Site": "same-origin", "Origin": own},
		"typed in the bar":      {"Sec-Fetch-Site": "none"},
		"trusted origin":        {"Origin": trusted, "Sec-Fetch-Site": "same-site"},
	} {
		if a := do(t, srv, http.MethodPost, h); a.status != http.StatusOK {
			t.Errorf("%s: %d %q, want 200", name, a.status, a.body)
		}
	}
	if a := do(t, srv, http.MethodGet, map[string]string{"Origin": "https://evil.example"}); a.status != http.StatusOK {
		t.Errorf("cross-origin GET: %d; safe methods are the CORS policy's business", a.status)
	}
	any := serve(t, Options{TrustedOrigins: []string{"*"}})
	if a := do(t, any, http.MethodPost, map[string]string{"Origin": "https://evil.example"}); a.status != http.StatusOK {
		t.Errorf("trusted origin *: %d", a.status)
	}
}

// Every response carries the security headers, also one whose handler
// set a CSP and a weaker X-Frame-Options of its own, and one flushed
// before anything was written.
func TestSecurityHeaders(t *testing.T) {
	g, err := New(Options{ContentSecurityPolicy: "default-src 'self'"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/own":
			w.Header().Set("Content-Security-Policy", "frame-src 'self'")
			w.Header().Set("X-Frame-Options", "SAMEORIGIN")
			w.Header().Set("Referrer-Policy", "unsafe-url")
			_, _ = io.WriteString(w, "<p>page</p>")
		case "/flush":
			_ = http.NewResponseController(w).Flush()
		default:
			w.WriteHeader(http.StatusTeapot)
		}
	})))
	defer srv.Close()
	for _, path := range []string{"/own", "/flush", "/other"} {
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		h := resp.Header
		if h.Get("X-Frame-Options") != "DENY" || h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("%s: headers %v", path, h)
		}
		csp := h.Values("Content-Security-Policy")
		if !contains(csp, "default-src 'self'") || (path == "/own" && !contains(csp, "frame-src 'self'")) {
			t.Errorf("%s: CSP %q", path, csp)
		}
	}
}

// An application that frames itself (the Temporal Web UI) may allow
// same-origin frames only.
func TestSameOriginFrames(t *testing.T) {
	srv := serve(t, Options{SameOriginFrames: true, ContentSecurityPolicy: "frame-ancestors 'self'"})
	a := do(t, srv, http.MethodGet, nil)
	if a.header.Get("X-Frame-Options") != "SAMEORIGIN" || a.header.Get("Content-Security-Policy") != "frame-ancestors 'self'" {
		t.Fatalf("headers %v", a.header)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Configuration that is not a host name, an IP address or an origin is
// refused at start, naming the bad entry.
func TestBadConfig(t *testing.T) {
	for _, h := range []string{"keel.example:443", "http://keel.example", "*.example", "", "a..b", "-a.example", "keel example", "keel.example/x"} {
		if _, err := New(Options{AllowedHosts: []string{h}}); !errors.Is(err, ErrConfig) {
			t.Errorf("allowed host %q: %v, want ErrConfig", h, err)
		}
	}
	for _, o := range []string{"app.example", "https://app.example/path", "https://"} {
		if _, err := New(Options{TrustedOrigins: []string{o}}); !errors.Is(err, ErrConfig) {
			t.Errorf("trusted origin %q: %v, want ErrConfig", o, err)
		}
	}
	if _, err := New(Options{AllowedHosts: []string{" Keel_1.internal ", "::1", "[fd00::2]"}, TrustedOrigins: []string{"https://app.example"}}); err != nil {
		t.Errorf("good configuration refused: %v", err)
	}
}
