package store

import (
	"net/http"

	"go.temporal.io/sdk/converter"
)

// HandlerOptions configures Codec.Handler.
type HandlerOptions struct {
	// AllowOrigin is the origin of the Temporal Web UI (for example
	// "http://localhost:8233"), which calls the codec endpoint from the
	// browser and so needs CORS. "*" allows any origin; empty allows none,
	// which suits callers that are not browsers, such as the temporal CLI.
	AllowOrigin string
}

// Handler serves Temporal's remote codec protocol for c: POST .../encode
// and .../decode with {"payloads":[...]}. It is what the Temporal Web UI's
// codec endpoint setting and `temporal --codec-endpoint` expect, and it lets
// processes that cannot reach the store see the values behind references.
// Anyone who can reach the handler can read the store, so serve it only
// where the store's readers may.
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
			h.Set("Access-Control-Allow-Headers", "Content-Type, X-Namespace")
		}
		if r.Method == http.MethodOptions {
			// A preflight from a disallowed origin gets no CORS headers,
			// which is how a browser is told no.
			w.WriteHeader(http.StatusNoContent)
			return
		}
		codec.ServeHTTP(w, r)
	})
}

func allowed(allow, origin string) bool {
	return allow == "*" || (allow != "" && allow == origin)
}
