package mcp

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// stdioTerminate is how long a stdio server has to exit after its input
// closed before it gets SIGTERM.
const stdioTerminate = 2 * time.Second

// stdioEnv are the variables of the worker a stdio server inherits; the
// rest of the worker's environment (provider keys) stays out.
var stdioEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TMPDIR", "LANG"}

// transport returns how to reach the server: a fresh process for a stdio
// server, HTTP requests with the expanded headers for a URL.
func (s *server) transport() (sdk.Transport, error) {
	if s.cfg.Command != "" {
		env, err := s.cfg.expandAll("env", s.cfg.Env)
		if err != nil {
			return nil, err
		}
		cmd := exec.Command(s.cfg.Command, s.cfg.Args...)
		for _, k := range stdioEnv {
			if v, ok := os.LookupEnv(k); ok {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
		}
		keys := make([]string, 0, len(env))
		for k := range env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			cmd.Env = append(cmd.Env, k+"="+env[k])
		}
		cmd.Stderr = stderrLog(s.log)
		return countingTransport{Transport: &sdk.CommandTransport{Command: cmd, TerminateDuration: stdioTerminate}, s: s}, nil
	}
	headers, err := s.cfg.expandAll("headers", s.cfg.Headers)
	if err != nil {
		return nil, err
	}
	return &sdk.StreamableClientTransport{
		Endpoint: s.cfg.URL,
		// Temporal retries the call; the transport's own reconnects would
		// hide a dead server behind minutes of attempts.
		MaxRetries: 1,
		HTTPClient: &http.Client{Transport: httpTransport{headers: headers, next: http.DefaultTransport, s: s}},
	}, nil
}

// httpTransport adds the configured headers to every request (the values
// live in memory only: never in logs, errors or history), and counts the
// progress notifications of event streams (progress.go).
type httpTransport struct {
	headers map[string]string
	next    http.RoundTripper
	s       *server
}

func (t httpTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.headers {
		r.Header.Set(k, v)
	}
	resp, err := t.next.RoundTrip(r)
	if err == nil && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body = &sseCounter{ReadCloser: resp.Body, s: t.s}
	}
	return resp, err
}

// stderrLog returns a writer logging each line a stdio server writes to
// its standard error (at debug level: servers chat there).
func stderrLog(log *slog.Logger) io.Writer { return &lineLog{log: log} }

type lineLog struct {
	log     *slog.Logger
	partial []byte
}

// Write is called by one goroutine of os/exec at a time.
func (l *lineLog) Write(p []byte) (int, error) {
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.log.Debug("mcp server stderr", "line", string(l.partial[:i]))
		l.partial = l.partial[i+1:]
	}
	if len(l.partial) > 64<<10 {
		l.partial = l.partial[:0]
	}
	return len(p), nil
}
