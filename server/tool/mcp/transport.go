package mcp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"syscall"
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
		return countingTransport{Transport: &stdioTransport{cmd: cmd, s: s}, s: s}, nil
	}
	headers, err := s.cfg.expandAll("headers", s.cfg.Headers)
	if err != nil {
		return nil, err
	}
	origin, err := url.Parse(s.cfg.URL)
	if err != nil {
		return nil, &ConfigError{Server: s.cfg.Name, Field: "url", Problem: err.Error()}
	}
	return &sdk.StreamableClientTransport{
		Endpoint: s.cfg.URL,
		// Temporal retries the call; the transport's own reconnects would
		// hide a dead server behind minutes of attempts.
		MaxRetries: 1,
		// bodyLimit bounds each event first and names the limit.
		MaxEventSize: s.cfg.maxResponse(),
		HTTPClient: &http.Client{
			Transport:     httpTransport{headers: headers, origin: origin, next: http.DefaultTransport, s: s},
			CheckRedirect: checkRedirect(origin),
		},
	}, nil
}

// httpTransport adds the configured headers to every request to the
// server's origin (the values live in memory only: never in logs, errors
// or history, and never go to another host), bounds every response
// (bodyLimit), and counts the progress notifications of event streams
// (progress.go).
type httpTransport struct {
	headers map[string]string
	origin  *url.URL
	next    http.RoundTripper
	s       *server
}

func (t httpTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if sameOrigin(r.URL, t.origin) {
		r = r.Clone(r.Context())
		for k, v := range t.headers {
			r.Header.Set(k, v)
		}
	}
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	sse := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	if sse {
		resp.Body = &sseCounter{ReadCloser: resp.Body, s: t.s}
	}
	resp.Body = newBodyLimit(resp.Body, sse, t.s)
	return resp, nil
}

// stdioTransport starts a stdio server and speaks newline-delimited
// JSON-RPC with it, each line bounded (lineLimit). Closing it closes the
// server's input, waits stdioTerminate for it to exit, then sends SIGTERM
// and, after as long again, SIGKILL.
type stdioTransport struct {
	cmd *exec.Cmd
	s   *server
}

func (t *stdioTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: t.cmd, stdin: stdin}
	tr := &sdk.IOTransport{
		Reader: readCloser{Reader: &lineLimit{r: stdout, max: t.s.cfg.maxResponse(), s: t.s}, close: p.stop},
		Writer: p,
		// lineLimit bounds each line and names the limit.
		MaxLineLength: -1,
	}
	return tr.Connect(ctx)
}

// process is a started stdio server: its input, and how it is stopped.
type process struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	once  sync.Once
	err   error
}

func (p *process) Write(b []byte) (int, error) { return p.stdin.Write(b) }

// Close is a no-op: the reader's close stops the process (the SDK closes
// the reader first).
func (p *process) Close() error { return nil }

// stop closes the server's input and waits for it to exit, signalling it
// when it does not; cmd.Wait also closes its output.
func (p *process) stop() error {
	p.once.Do(func() {
		_ = p.stdin.Close()
		exited := make(chan error, 1)
		go func() { exited <- p.cmd.Wait() }()
		wait := func() bool {
			select {
			case p.err = <-exited:
				return true
			case <-time.After(stdioTerminate):
				return false
			}
		}
		if wait() {
			return
		}
		if p.cmd.Process.Signal(syscall.SIGTERM) == nil && wait() {
			return
		}
		_ = p.cmd.Process.Kill()
		if !wait() {
			p.err = errors.New("mcp: the stdio server does not exit")
		}
	})
	return p.err
}

// readCloser is a reader whose Close is close.
type readCloser struct {
	io.Reader
	close func() error
}

func (r readCloser) Close() error { return r.close() }

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
