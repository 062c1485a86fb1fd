package mcp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// DefaultMaxResponseBytes bounds one message an MCP server sends when its
// ServerConfig sets no MaxResponseBytes: a stdio server's line, an HTTP
// server's JSON body, one server-sent event. A tool's output reaches the
// model cut to 64 KiB anyway (activities.MaxToolOutput); the bound is on
// what the worker reads and holds in memory for a server it does not
// trust, with room for an image in a result.
const DefaultMaxResponseBytes = 8 << 20

// MaxListedTools bounds the tools keel registers for one server; a server
// that lists more (page after page) gets the first ones.
const MaxListedTools = 1000

// ErrResponseTooLarge: a server sent a message over its MaxResponseBytes.
// The connection is dropped (the next call connects again) and the call
// in flight gets an error result naming the limit.
var ErrResponseTooLarge = errors.New("mcp: server message over the size limit")

// ResponseTooLargeError is ErrResponseTooLarge for one server.
type ResponseTooLargeError struct {
	Server string
	Limit  int
}

func (e *ResponseTooLargeError) Error() string {
	return fmt.Sprintf("MCP server %q sent a message over the %d-byte limit (max_response_bytes); "+
		"keel dropped the connection, and the next call connects again", e.Server, e.Limit)
}

// Is makes errors.Is(err, ErrResponseTooLarge) hold.
func (e *ResponseTooLargeError) Is(target error) bool { return target == ErrResponseTooLarge }

// maxResponse is the server's limit with its default.
func (c ServerConfig) maxResponse() int {
	if c.MaxResponseBytes > 0 {
		return c.MaxResponseBytes
	}
	return DefaultMaxResponseBytes
}

// tooLarge records that the server exceeded its limit, for the call that
// fails with the connection, and returns the error.
func (s *server) tooLarge() *ResponseTooLargeError {
	e := &ResponseTooLargeError{Server: s.cfg.Name, Limit: s.cfg.maxResponse()}
	s.oversize.Store(e)
	return e
}

// lineLimit reads a stdio server's output, failing once a line (one
// JSON-RPC message) is longer than max bytes. Messages before it on the
// wire are delivered first.
type lineLimit struct {
	r    io.Reader
	max  int
	line int // bytes of the line being read
	err  error
	s    *server
}

func (l *lineLimit) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	n, err := l.r.Read(p)
	done := 0 // bytes of p up to the last newline seen
	for rest := p[:n]; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			l.line += len(rest)
			break
		}
		l.line += i
		if l.line > l.max {
			break
		}
		l.line = 0
		done += i + 1
		rest = rest[i+1:]
	}
	if l.line > l.max {
		l.err = l.s.tooLarge()
		if done == 0 {
			return 0, l.err
		}
		return done, nil
	}
	return n, err
}

// bodyLimit bounds an HTTP response of a server: a JSON body (or any
// other, such as an error page) as a whole, an event stream per event, so
// that the stream a session keeps open may run as long as it likes.
type bodyLimit struct {
	io.ReadCloser
	max   int
	sse   bool
	n     int  // bytes of the body, or of the event being read
	blank bool // an event stream's line so far is empty (or "\r")
	err   error
	s     *server
}

func newBodyLimit(body io.ReadCloser, sse bool, s *server) *bodyLimit {
	return &bodyLimit{ReadCloser: body, max: s.cfg.maxResponse(), sse: sse, blank: true, s: s}
}

func (b *bodyLimit) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.ReadCloser.Read(p)
	if !b.sse {
		b.n += n
		if b.n > b.max {
			b.err = b.s.tooLarge()
			return 0, b.err
		}
		return n, err
	}
	for _, c := range p[:n] {
		b.n++
		switch {
		case c == '\n':
			if b.blank { // an empty line ends the event
				b.n = 0
			}
			b.blank = true
		case c != '\r':
			b.blank = false
		}
		if b.n > b.max {
			b.err = b.s.tooLarge()
			return 0, b.err
		}
	}
	return n, err
}

// sameOrigin reports whether u is on the configured server's scheme, host
// and port: only there do the configured headers go.
func sameOrigin(u, server *url.URL) bool {
	return u.Scheme == server.Scheme && u.Host == server.Host
}

// checkRedirect refuses a redirect to another origin than the server's: the
// worker reaches the hosts its configuration names and no others, and
// the configured headers (tokens) stay with that host.
func checkRedirect(server *url.URL) func(*http.Request, []*http.Request) error {
	return func(r *http.Request, via []*http.Request) error {
		if !sameOrigin(r.URL, server) {
			return fmt.Errorf("mcp: the server redirected to %s://%s, another origin than %s://%s; keel follows no such redirect",
				r.URL.Scheme, r.URL.Host, server.Scheme, server.Host)
		}
		if len(via) >= 10 {
			return errors.New("mcp: stopped after 10 redirects")
		}
		return nil
	}
}
