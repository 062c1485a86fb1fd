package httpguard

import "net/http"

// Security headers of every response.
const (
	// FrameOptions keeps every page out of frames: the web page's Approve
	// and Cancel buttons must not be clickable under another site's
	// overlay (clickjacking). The CSP's frame-ancestors says it again for
	// browsers that read only that. (Options.SameOriginFrames: SAMEORIGIN.)
	FrameOptions = "DENY"
	// ReferrerPolicy sends no Referer: a URL of keel's (a session ID in
	// a path) never leaks to the sites a page links to.
	ReferrerPolicy = "no-referrer"
)

// headerWriter sets the security headers just before the response's
// header is written, so a handler that sets its own (the Web UI sets a
// CSP and X-Frame-Options) cannot drop or weaken them.
type headerWriter struct {
	http.ResponseWriter
	policy string
	frames string
	done   bool
}

func (w *headerWriter) apply() {
	if w.done {
		return
	}
	w.done = true
	h := w.ResponseWriter.Header()
	h.Set("X-Frame-Options", w.frames)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", ReferrerPolicy)
	// Several policies are each enforced: adding ours to a handler's
	// can only restrict more.
	h.Add("Content-Security-Policy", w.policy)
}

func (w *headerWriter) WriteHeader(status int) {
	w.apply()
	w.ResponseWriter.WriteHeader(status)
}

func (w *headerWriter) Write(b []byte) (int, error) {
	w.apply()
	return w.ResponseWriter.Write(b)
}

// FlushError is what http.ResponseController calls to flush: a response
// flushed before anything was written must carry the headers too.
func (w *headerWriter) FlushError() error {
	w.apply()
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Flush is for handlers that assert http.Flusher.
func (w *headerWriter) Flush() { _ = w.FlushError() }

// Unwrap lets http.ResponseController reach the connection (deadlines,
// hijacking).
func (w *headerWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
