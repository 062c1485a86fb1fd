package store

import (
	"crypto/subtle"
	"net/http"
	"strings"

	"go.temporal.io/sdk/converter"
)

// HandlerOptions configures Codec.Handler.
type HandlerOptions struct {
	// AllowOrigin is the origin of the Temporal Web UI (for example
	// "http://localhost:8233"), which calls the codec endpoint from the
	// browser and so needs CORS. "*" allows any origin; empty allows none,
	// which suits callers that are not browsers, such as the temporal CLI.
	AllowOrigin string
	// Token, if set, is required of every request but a CORS preflight as
	// "Authorization: Bearer TOKEN"; others get 401. This is the header
	// that `temporal --codec-auth`, keel's readers (KEEL_CODEC_TOKEN) and
	// a Web UI with codec.passAccessToken send. Empty: no check, for an
	// endpoint that only trusted processes can reach (keel dev's, on
	// loopback).
	Token string
}

// Handler serves Temporal's remote codec protocol for c: POST .../encode
// and .../decode with {"payloads":[...]}. It is what the Temporal Web UI's
// codec endpoint setting and `temporal --codec-endpoint` expect, and it lets
// processes that cannot reach the store see the values behind references.
// With CodecOptions.Encryption it decrypts too. Anyone who can reach the
// handler (and holds HandlerOptions.Token, if set) can read the store and
// every encrypted value, so serve it only where those readers may.
func (c *Codec) Handler(opts HandlerOptions) http.Handler {
	codec := converter.NewPayloadCodecHTTPHandler(c)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
		codec.ServeHTTP(w, r)
	})
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
