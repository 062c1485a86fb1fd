package httpguard

import (
	"net/http"
	"time"
)

// Timeouts and limits of NewServer's http.Server.
const (
	// DefaultReadHeaderTimeout bounds reading a request's header: a client
	// that sends it a byte at a time (slowloris) is cut off.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultReadTimeout bounds reading a whole request, body included.
	// net/http lifts it once the request is read, so it does not cut a
	// long response (TestStreamOutlivesServerTimeouts).
	DefaultReadTimeout = time.Minute
	// DefaultWriteTimeout bounds writing a response that sets no deadline
	// of its own. It is longer than the gateway's RequestTimeout (1 min),
	// so a slow Temporal call is answered with a typed 503 before the
	// connection is cut. Event streams set a deadline before each write
	// (http.ResponseController), so they run for as long as their client
	// reads.
	DefaultWriteTimeout = 2 * time.Minute
	// DefaultIdleTimeout is how long a kept-alive connection waits for
	// its next request.
	DefaultIdleTimeout = 2 * time.Minute
	// DefaultMaxHeaderBytes bounds a request's header (Go's own default is
	// 1 MiB); a larger one gets 431.
	DefaultMaxHeaderBytes = 64 << 10
)

// NewServer returns an http.Server for h with the default timeouts and
// header limit above. Change its fields before serving to tune them.
func NewServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: DefaultReadHeaderTimeout,
		ReadTimeout:       DefaultReadTimeout,
		WriteTimeout:      DefaultWriteTimeout,
		IdleTimeout:       DefaultIdleTimeout,
		MaxHeaderBytes:    DefaultMaxHeaderBytes,
	}
}
