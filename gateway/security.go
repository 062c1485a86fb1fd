package gateway

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
)

// EnvAPIKeys names the environment variable that holds API keys, separated
// by commas or newlines.
const EnvAPIKeys = "KEEL_API_KEYS"

// ErrNoKeys is returned by CheckListen for a listener other machines can
// reach when no API key is configured.
var ErrNoKeys = errors.New("gateway: refusing to listen on a non-loopback address without API keys " +
	"(give keys with --api-key-file or " + EnvAPIKeys + ", or listen on 127.0.0.1)")

// LoadAPIKeys reads API keys: one a line from file (blank lines and lines
// starting with # are skipped) when file is not empty, then those in the
// environment variable EnvAPIKeys. Errors never quote a key.
func LoadAPIKeys(file string) ([]string, error) {
	var keys []string
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("gateway: read API key file: %w", err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for line := 1; sc.Scan(); line++ {
			k := strings.TrimSpace(sc.Text())
			if k == "" || strings.HasPrefix(k, "#") {
				continue
			}
			if err := checkKey(k); err != nil {
				return nil, fmt.Errorf("gateway: API key file %s, line %d: %w", file, line, err)
			}
			keys = append(keys, k)
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("gateway: read API key file: %w", err)
		}
		if len(keys) == 0 {
			return nil, fmt.Errorf("gateway: API key file %s holds no key", file)
		}
	}
	for _, k := range strings.FieldsFunc(os.Getenv(EnvAPIKeys), func(r rune) bool { return r == ',' || r == '\n' }) {
		if k = strings.TrimSpace(k); k == "" {
			continue
		}
		if err := checkKey(k); err != nil {
			return nil, fmt.Errorf("gateway: %s: %w", EnvAPIKeys, err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// minKeyLength keeps guessable keys out.
const minKeyLength = 16

func checkKey(k string) error {
	if len(k) < minKeyLength {
		return fmt.Errorf("an API key must have at least %d characters (this one has %d)", minKeyLength, len(k))
	}
	for _, r := range k {
		if r <= ' ' || r == 0x7f {
			return errors.New("an API key may not hold spaces or control characters")
		}
	}
	return nil
}

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
// the web page (gateway/web) works under: its script, style sheet and
// calls come from the gateway itself, nothing is inline, and no other
// site may frame it (its Approve and Cancel buttons must not be
// clickjacked).
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// keyring checks bearer tokens. It holds the keys' hashes, so comparing
// takes the same time whatever the key's length, and no key is kept in
// the clear.
type keyring struct{ sums [][sha256.Size]byte }

func newKeyring(keys []string) (*keyring, error) {
	kr := &keyring{}
	for _, k := range keys {
		if err := checkKey(k); err != nil {
			return nil, fmt.Errorf("gateway: %w", err)
		}
		kr.sums = append(kr.sums, sha256.Sum256([]byte(k)))
	}
	return kr, nil
}

func (kr *keyring) enabled() bool { return len(kr.sums) > 0 }

// allows reports whether r carries one of the keys.
func (kr *keyring) allows(r *http.Request) bool {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	found := 0
	for _, s := range kr.sums {
		found |= subtle.ConstantTimeCompare(s[:], sum[:])
	}
	return found == 1
}

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
	corsMethods = "GET, POST, DELETE, OPTIONS"
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
