package gateway

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
)

// ErrNoKeys is returned by CheckListen for a listener other machines can
// reach when no API key is configured.
var ErrNoKeys = errors.New("gateway: refusing to listen on a non-loopback address without API keys " +
	"(give keys with --api-key-file or " + EnvAPIKeys + ", or listen on 127.0.0.1)")

// CheckListen refuses an address other machines can reach (anything but a
// loopback IP or "localhost") when there are no API keys.
func CheckListen(addr string, haveKeys bool) error {
	if haveKeys {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("gateway: listen address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return ErrNoKeys
}

// ContentSecurityPolicy is the policy of the gateway's responses, which
// the web page (server/gateway/web) works under: its script, style sheet and
// calls come from the gateway itself, nothing is inline, and no other
// site may frame it (its Approve and Cancel buttons must not be
// clickjacked).
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// cors applies the origin allow-list. Browsers send Origin on cross-origin
// requests and on same-origin POSTs; programs (curl, SDKs) send none.
type cors struct {
	any     bool
	origins map[string]bool
}

func newCORS(origins []string) *cors {
	c := &cors{origins: map[string]bool{}}
	for _, o := range origins {
		o = strings.TrimRight(strings.TrimSpace(o), "/")
		switch o {
		case "":
		case "*":
			c.any = true
		default:
			c.origins[o] = true
		}
	}
	return c
}

// allowed reports whether a request from origin may proceed: no origin
// (not a browser), the gateway's own origin, or one on the list.
func (c *cors) allowed(r *http.Request, origin string) bool {
	if origin == "" || c.any || c.origins[origin] {
		return true
	}
	scheme := "http://"
	if r.TLS != nil {
		scheme = "https://"
	}
	return origin == scheme+r.Host
}

// corsHeaders are what a browser needs to let a page call the API.
const (
	corsMethods = "GET, POST, PATCH, DELETE, OPTIONS"
	corsHeaders = "Authorization, Content-Type, Last-Event-ID"
)

// headers adds the CORS response headers for an allowed origin.
func (c *cors) headers(w http.ResponseWriter, origin string) {
	h := w.Header()
	h.Add("Vary", "Origin")
	if origin == "" {
		return
	}
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Expose-Headers", "WWW-Authenticate")
}
