package store

import (
	"bytes"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"

	"go.temporal.io/sdk/converter"

	"github.com/keelrun/keel/internal/httpguard"
)

// DefaultMaxHandlerBodyBytes bounds a codec request's body: 4 MiB, the
// largest message Temporal's frontend takes by default, so no set of
// payloads a reader got from Temporal is larger. A larger body gets 413
// before more than this is read.
const DefaultMaxHandlerBodyBytes = 4 << 20

// ErrNoToken is returned by CheckListen for a codec endpoint other
// machines can reach when it requires no token.
var ErrNoToken = errors.New("store: refusing to serve the codec endpoint on a non-loopback address without a token " +
	"(set --codec-token or KEEL_CODEC_TOKEN, or listen on 127.0.0.1): whoever reaches it reads every value, decrypted")

// HandlerOptions configures Codec.Handler.
type HandlerOptions struct {
	// AllowOrigin is the origin of the Temporal Web UI (for example
	// "http://localhost:8233"), which calls the codec endpoint from the
	// browser and so needs CORS; its cross-origin POSTs are trusted. "*"
	// allows any origin; empty allows none, which suits callers that are
	// not browsers, such as the temporal CLI: a browser POST from any
	// other origin gets 403.
	AllowOrigin string
	// Token, if set, is required of every request but a CORS preflight as
	// "Authorization: Bearer TOKEN"; others get 401. This is the header
	// that `temporal --codec-auth`, keel's readers (KEEL_CODEC_TOKEN) and
	// a Web UI with codec.passAccessToken send. Empty: no check, for an
	// endpoint that only trusted processes can reach (keel dev's, on
	// loopback; CheckListen refuses others).
	Token string
	// AllowedHosts are the host names the endpoint answers to besides its
	// own address and, on loopback, localhost (internal/httpguard): a
	// request naming another host in its Host header (DNS rebinding) gets
	// 403. Optional.
	AllowedHosts []string
	// MaxBodyBytes bounds a request body; a larger one gets 413.
	// Optional: default DefaultMaxHandlerBodyBytes.
	MaxBodyBytes int64
}

// Validate reports what is wrong with opts: an allowed host that is not a
// host name or an IP address, an origin that is not scheme://host[:port].
func (o HandlerOptions) Validate() error {
	_, err := o.guard()
	return err
}

func (o HandlerOptions) guard() (*httpguard.Guard, error) {
	var trusted []string
	if o.AllowOrigin != "" {
		trusted = []string{o.AllowOrigin}
	}
	g, err := httpguard.New(httpguard.Options{AllowedHosts: o.AllowedHosts, TrustedOrigins: trusted})
	if err != nil {
		return nil, fmt.Errorf("store: codec endpoint: %w", err)
	}
	return g, nil
}

// Handler serves Temporal's remote codec protocol for c: POST .../encode
// and .../decode with {"payloads":[...]} as application/json. It is what
// the Temporal Web UI's codec endpoint setting and `temporal
// --codec-endpoint` expect, and it lets processes that cannot reach the
// store see the values behind references. With CodecOptions.Encryption it
// decrypts too. Anyone who can reach the handler (and holds
// HandlerOptions.Token, if set) can read the store and every encrypted
// value, so serve it only where those readers may (CheckListen).
//
// Before the codec sees a request, the handler refuses (in this order) a
// Host that does not name the endpoint and a cross-origin POST from an
// origin other than AllowOrigin (403), a missing or wrong token (401), a
// body not sent as application/json (415) and a body over MaxBodyBytes
// (413). Every response carries keel's security headers. Handler panics
// when opts do not Validate: check them first.
func (c *Codec) Handler(opts HandlerOptions) http.Handler {
	guard, err := opts.guard()
	if err != nil {
		panic(err)
	}
	limit := opts.MaxBodyBytes
	if limit <= 0 {
		limit = DefaultMaxHandlerBodyBytes
	}
	codec := converter.NewPayloadCodecHTTPHandler(c)
	return guard.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		if opts.AllowOrigin != "" && opts.AllowOrigin != "*" {
			// The answer depends on the Origin header; caches must know.
			h.Add("Vary", "Origin")
		}
		if origin := r.Header.Get("Origin"); origin != "" && allowed(opts.AllowOrigin, origin) {
			h.Set("Access-Control-Allow-Origin", opts.AllowOrigin)
			h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "Content-Type, X-Namespace, Authorization")
			if opts.AllowOrigin != "*" {
				// For a UI set to codec.includeCredentials; browsers
				// refuse credentials with a wildcard origin.
				h.Set("Access-Control-Allow-Credentials", "true")
			}
		}
		if r.Method == http.MethodOptions {
			// A preflight from a disallowed origin gets no CORS headers,
			// which is how a browser is told no.
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if opts.Token != "" && !bearer(r, opts.Token) {
			h.Set("WWW-Authenticate", `Bearer realm="keel codec"`)
			http.Error(w, "codec endpoint: missing or wrong bearer token", http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodPost {
			if e := httpguard.RequireJSON(r); e != nil {
				e.Write(w, false)
				return
			}
			body, err := readBody(w, r, limit)
			if err != nil {
				http.Error(w, err.Error(), statusOf(err))
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		codec.ServeHTTP(w, r)
	}))
}

// errBodyTooLarge is a codec request's body over the limit.
type errBodyTooLarge struct{ limit int64 }

func (e errBodyTooLarge) Error() string {
	return "codec endpoint: request body is over " + strconv.FormatInt(e.limit, 10) + " bytes"
}

func statusOf(err error) int {
	if errors.As(err, new(errBodyTooLarge)) {
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusBadRequest
}

// readBody reads r's body, at most limit bytes: a declared length over
// the limit is refused before any of it is read, an undeclared one once
// the limit is passed.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, errBodyTooLarge{limit}
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if tooLarge := new(http.MaxBytesError); errors.As(err, &tooLarge) {
		return nil, errBodyTooLarge{limit}
	}
	if err != nil {
		return nil, fmt.Errorf("codec endpoint: read the request body: %w", err)
	}
	return b, nil
}

// CheckListen refuses an address other machines can reach (anything but a
// loopback IP or "localhost") for a codec endpoint without a token: it
// returns ErrNoToken then.
func CheckListen(addr string, haveToken bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("store: codec endpoint address %q: %w", addr, err)
	}
	if haveToken || strings.EqualFold(host, "localhost") {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return ErrNoToken
}

// bearer reports whether r carries "Authorization: Bearer token", compared
// in constant time.
func bearer(r *http.Request, token string) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}

func allowed(allow, origin string) bool {
	return allow == "*" || (allow != "" && allow == origin)
}
