package httpguard

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// streamHandler writes lines for longer than the server's read and write
// timeouts, setting a write deadline before each as the gateway's event
// streams do, and reports on ended whether its request's context ended
// before it finished.
func streamHandler(lines int, every time.Duration, ended chan<- bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil {
			_, _ = bufio.NewReader(r.Body).WriteTo(discard{})
		}
		rc := http.NewResponseController(w)
		w.Header().Set("Content-Type", "text/event-stream")
		tick := time.NewTicker(every)
		defer tick.Stop()
		for i := range lines {
			select {
			case <-r.Context().Done():
				ended <- true
				return
			case <-tick.C:
			}
			_ = rc.SetWriteDeadline(time.Now().Add(time.Second))
			if _, err := w.Write([]byte("data: " + strings.Repeat("x", i%7) + "\n\n")); err != nil {
				ended <- true
				return
			}
			_ = rc.Flush()
		}
		ended <- false
	})
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// startStreamServer serves h on NewServer's server with short timeouts.
func startStreamServer(t *testing.T, h http.Handler, timeout time.Duration) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config = NewServer(h)
	srv.Config.ReadTimeout, srv.Config.WriteTimeout = timeout, timeout
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// A stream (GET, or POST with a body first, like AG-UI) runs ten times
// longer than the server's read and write timeouts: its per-write
// deadlines keep the connection, and the read timeout, over once the
// request was read, does not cancel the request's context.
func TestStreamOutlivesServerTimeouts(t *testing.T) {
	s := NewServer(nil)
	if s.ReadHeaderTimeout != DefaultReadHeaderTimeout || s.ReadTimeout != DefaultReadTimeout || s.WriteTimeout != DefaultWriteTimeout ||
		s.IdleTimeout != DefaultIdleTimeout || s.MaxHeaderBytes != DefaultMaxHeaderBytes {
		t.Fatalf("NewServer's timeouts: %+v", s)
	}
	g, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	const lines, every, timeout = 40, 25 * time.Millisecond, 100 * time.Millisecond
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		ended := make(chan bool, 1)
		srv := startStreamServer(t, g.Handler(streamHandler(lines, every, ended)), timeout)
		var body *strings.Reader
		if method == http.MethodPost {
			body = strings.NewReader(`{"threadId":"t"}`)
		}
		req, _ := http.NewRequestWithContext(t.Context(), method, srv.URL, nil)
		if body != nil {
			req, _ = http.NewRequestWithContext(t.Context(), method, srv.URL, body)
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "data: ") {
				n++
			}
		}
		resp.Body.Close()
		if cut := <-ended; cut || n != lines {
			t.Errorf("%s: %d of %d events, context ended early %v", method, n, lines, cut)
		}
	}
}

// A response that sets no deadline of its own is cut by the server's
// write timeout: a client that stops reading a large answer does not hold
// the connection for ever.
func TestWriteTimeoutCutsResponseWithoutDeadline(t *testing.T) {
	done := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := []byte(strings.Repeat("x", 64<<10))
		for {
			if _, err := w.Write(chunk); err != nil {
				done <- err
				return
			}
		}
	})
	srv := startStreamServer(t, h, 100*time.Millisecond)
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// The client reads nothing; the server's writes fail once the
	// deadline passes.
	if err := <-done; err == nil {
		t.Fatal("the write never failed")
	}
}
