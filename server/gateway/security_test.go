package gateway_test

import (
	"bytes"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/keelrun/keel/server/gateway"
)

// syncBuffer is a log sink safe for concurrent handlers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// With keys configured, a call without a valid key gets 401 and changes
// nothing; a valid key works; no key reaches the log.
func TestAPIKeys(t *testing.T) {
	const good, other, wrong = "k-good-0123456789abcdef", "k-other-0123456789abcdef", "k-wrong-0123456789abcdef"
	var logs syncBuffer
	s := startGateway(t, gateway.Options{APIKeys: []string{good, other},
		Logger: jsonLogger(t, &logs)})
	m := model(t, `{"turns":[{"text":["hi"]}]}`)
	prompt := map[string]any{"prompt": "hello", "model": m}

	for name, auth := range map[string]string{"no key": "", "wrong key": "Bearer " + wrong,
		"not bearer": "Basic " + good, "key as prefix": "Bearer " + good + "x"} {
		r := s.callWith(t, http.MethodPost, "/v1/sessions/keys/runs", prompt, map[string]string{"Authorization": auth})
		if r.status != http.StatusUnauthorized || r.code() != "unauthorized" || !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
			t.Fatalf("%s: %d %s", name, r.status, r.raw)
		}
	}
	// Nothing changed: the session does not exist.
	s.call(t, http.MethodGet, "/v1/sessions/keys", nil).must(t, http.StatusNotFound)
	r := s.callWith(t, http.MethodGet, "/v1/sessions/keys", nil, nil).must(t, http.StatusUnauthorized)
	if r.code() != "unauthorized" {
		t.Fatalf("state without key: %s", r.raw)
	}
	// Every session route wants the key; the OpenAPI document does not.
	s.callWith(t, http.MethodGet, "/v1/sessions/keys/events", nil, nil).must(t, http.StatusUnauthorized)
	s.callWith(t, http.MethodGet, "/v1/openapi.json", nil, nil).must(t, http.StatusOK)

	s.send(t, "keys", prompt)
	s.callWith(t, http.MethodGet, "/v1/sessions/keys", nil, map[string]string{"Authorization": "Bearer " + other}).must(t, http.StatusOK)

	out := logs.String()
	if !strings.Contains(out, `"status":401`) || !strings.Contains(out, "/v1/sessions/keys/runs") {
		t.Fatalf("the log misses the requests:\n%s", out)
	}
	for _, k := range []string{good, other, wrong} {
		if strings.Contains(out, k) {
			t.Fatalf("a key reached the log:\n%s", out)
		}
	}
}

// Keys come from a file (one a line) and the environment, each with its
// options; a bare key has full access. Bad keys and options are refused
// without the key or the option's value being quoted.
func TestLoadAPIKeys(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "keys")
	if err := os.WriteFile(file, []byte("# keel keys\nfile-key-0123456789abcdef\n\n  second-key-0123456789ab  scope=read\n"+
		"third-key-0123456789abc\tprefix=team-a- scope=full\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(gateway.EnvAPIKeys, "env-key-0123456789abcdef,env-key-2-0123456789abcdef scope=read prefix=b_")
	keys, err := gateway.LoadAPIKeys(file)
	if err != nil {
		t.Fatal(err)
	}
	want := []gateway.APIKey{
		{Key: "file-key-0123456789abcdef"},
		{Key: "second-key-0123456789ab", Scope: gateway.ScopeRead},
		{Key: "third-key-0123456789abc", Scope: gateway.ScopeFull, Prefix: "team-a-"},
		{Key: "env-key-0123456789abcdef"},
		{Key: "env-key-2-0123456789abcdef", Scope: gateway.ScopeRead, Prefix: "b_"},
	}
	if !slices.Equal(keys, want) {
		t.Fatalf("keys %+v, want %+v", keys, want)
	}
	t.Setenv(gateway.EnvAPIKeys, "short")
	if _, err := gateway.LoadAPIKeys(""); err == nil || strings.Contains(err.Error(), "short") {
		t.Fatalf("a short key: %v", err)
	}
	// Each bad line is refused; the error names the line, never the key
	// (SECRET…) nor a value (VALUE…), even where a second key sits in
	// the place of an option.
	t.Setenv(gateway.EnvAPIKeys, "")
	const key = "SECRET-0123456789abcdef"
	for name, line := range map[string]string{
		"unknown scope":       key + " scope=VALUE-write",
		"empty scope":         key + " scope=",
		"bad prefix":          key + " prefix=VALUE/team",
		"empty prefix":        key + " prefix=",
		"unknown option":      key + " VALUE=1",
		"two keys on a line":  key + " SECRET-second-0123456789",
		"option twice":        key + " scope=read scope=read",
		"control in the key":  "SECRET-0123\x01456789abcdef",
		"the same key twice":  key + "\n" + key + " scope=read",
		"key with no options": key + " =VALUE",
	} {
		bad := filepath.Join(dir, "bad")
		if err := os.WriteFile(bad, []byte("# comment\n"+line+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := gateway.LoadAPIKeys(bad)
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "VALUE") {
			t.Errorf("%s: the error quotes what it refuses: %v", name, err)
		}
		if name != "the same key twice" && !strings.Contains(err.Error(), "line 2") {
			t.Errorf("%s: the error names no line: %v", name, err)
		}
	}
	t.Setenv(gateway.EnvAPIKeys, key+" scope=VALUE")
	if _, err := gateway.LoadAPIKeys(""); err == nil || strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "VALUE") {
		t.Fatalf("a bad option in %s: %v", gateway.EnvAPIKeys, err)
	}
	t.Setenv(gateway.EnvAPIKeys, "")
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("# none\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := gateway.LoadAPIKeys(empty); err == nil {
		t.Fatal("a key file without keys was accepted")
	}
	if _, err := gateway.LoadAPIKeys(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("a missing key file was accepted")
	}
}

// The gateway listens beyond loopback only with keys.
func TestCheckListen(t *testing.T) {
	for _, c := range []struct {
		addr string
		keys bool
		ok   bool
	}{
		{"127.0.0.1:7280", false, true},
		{"localhost:7280", false, true},
		{"[::1]:7280", false, true},
		{"0.0.0.0:7280", false, false},
		{":7280", false, false},
		{"192.168.1.5:7280", false, false},
		{"0.0.0.0:7280", true, true},
	} {
		err := gateway.CheckListen(c.addr, c.keys)
		if (err == nil) != c.ok {
			t.Errorf("CheckListen(%q, keys %v) = %v", c.addr, c.keys, err)
		}
		if err != nil && !errors.Is(err, gateway.ErrNoKeys) {
			t.Errorf("CheckListen(%q): %v is not ErrNoKeys", c.addr, err)
		}
	}
	if _, err := gateway.New(nil, gateway.Options{APIKeys: []string{"short"}}); err == nil {
		t.Error("New accepted a short key")
	}
}

// Browsers may call from allowed origins only: preflights are answered,
// allowed origins get CORS headers, other origins get 403 and change
// nothing; requests without an Origin (programs) and from the gateway's
// own origin pass.
func TestCORS(t *testing.T) {
	const app = "https://app.example"
	s := startGateway(t, gateway.Options{CORSOrigins: []string{app + "/"}})

	pre := s.callWith(t, http.MethodOptions, "/v1/sessions/cors/runs", nil, map[string]string{
		"Origin": app, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization, content-type"}).
		must(t, http.StatusNoContent)
	if pre.header.Get("Access-Control-Allow-Origin") != app || !strings.Contains(pre.header.Get("Access-Control-Allow-Methods"), "POST") ||
		!strings.Contains(pre.header.Get("Access-Control-Allow-Headers"), "Authorization") ||
		!strings.Contains(pre.header.Get("Access-Control-Allow-Headers"), "Last-Event-ID") {
		t.Fatalf("preflight headers %v", pre.header)
	}
	bad := s.callWith(t, http.MethodOptions, "/v1/sessions/cors/runs", nil, map[string]string{
		"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}).must(t, http.StatusForbidden)
	if bad.code() != "origin_not_allowed" || bad.header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("preflight from another origin: %v %s", bad.header, bad.raw)
	}
	m := model(t, `{"turns":[{"text":["hi"]}]}`)
	s.callWith(t, http.MethodPost, "/v1/sessions/cors/runs", map[string]any{"prompt": "hi", "model": m},
		map[string]string{"Origin": "https://evil.example"}).must(t, http.StatusForbidden)
	s.call(t, http.MethodGet, "/v1/sessions/cors", nil).must(t, http.StatusNotFound)

	ok := s.callWith(t, http.MethodPost, "/v1/sessions/cors/runs", map[string]any{"prompt": "hi", "model": m},
		map[string]string{"Origin": app}).must(t, http.StatusAccepted)
	if ok.header.Get("Access-Control-Allow-Origin") != app || !strings.Contains(ok.header.Get("Vary"), "Origin") {
		t.Fatalf("allowed origin's headers %v", ok.header)
	}
	self := s.callWith(t, http.MethodGet, "/v1/sessions/cors", nil, map[string]string{"Origin": s.srv.URL})
	if self.status != http.StatusOK {
		t.Fatalf("same origin: %d %s", self.status, self.raw)
	}
}

// A request for another host name gets 403, keys or not: a web page
// whose name was rebound to 127.0.0.1 cannot pass as the gateway's own
// origin. Loopback names pass on the loopback connection, and so do the
// names the operator allowed.
func TestHostNotAllowed(t *testing.T) {
	const key = "rebind-key-0123456789"
	open := startGateway(t, gateway.Options{})
	keyed := startGateway(t, gateway.Options{APIKeys: []string{key}})
	for _, s := range []*stack{open, keyed} {
		for _, host := range []string{"evil.example", "evil.example:7280", "10.0.0.1:7280", "keel.example"} {
			r := s.callWith(t, http.MethodGet, "/v1/sessions/rebind", nil, map[string]string{
				"Host": host, "Origin": "http://" + host, "Authorization": bearer(s.key)}).must(t, http.StatusForbidden)
			if r.code() != gateway.CodeHostNotAllowed {
				t.Fatalf("Host %s: %s", host, r.raw)
			}
		}
		for _, host := range []string{"localhost:7280", "127.0.0.1", "[::1]:7280"} {
			s.callWith(t, http.MethodGet, "/v1/sessions/rebind", nil, map[string]string{"Host": host, "Authorization": bearer(s.key)}).
				must(t, http.StatusNotFound)
		}
	}
	named := startGateway(t, gateway.Options{APIKeys: []string{key}, AllowedHosts: []string{"keel.example"}})
	named.callWith(t, http.MethodGet, "/v1/sessions/rebind", nil, map[string]string{
		"Host": "keel.example", "Authorization": "Bearer " + key}).must(t, http.StatusNotFound)
	named.callWith(t, http.MethodGet, "/v1/sessions/rebind", nil, map[string]string{
		"Host": "evil.example", "Authorization": "Bearer " + key}).must(t, http.StatusForbidden)
	if _, err := gateway.New(nil, gateway.Options{AllowedHosts: []string{"keel.example:443"}}); err == nil {
		t.Error("New accepted an allowed host with a port")
	}
	if _, err := gateway.New(nil, gateway.Options{CORSOrigins: []string{"app.example"}}); err == nil {
		t.Error("New accepted a CORS origin without a scheme")
	}
}
