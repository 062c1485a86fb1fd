package devserver

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// StartForTest starts a server for a test and stops it when the test ends.
// Unset fields of cfg get test defaults rather than keel dev's: a free port
// (AnyPort), no Web UI unless cfg.UIPort is set, and server logs (warnings
// and up) in the test's log, shown when it fails. It fails the test if the
// server does not start within a minute.
func StartForTest(tb testing.TB, cfg Config) *Server {
	tb.Helper()
	if cfg.Port == 0 {
		cfg.Port = AnyPort
	}
	if cfg.UIPort == 0 {
		cfg.DisableUI = true
	}
	if cfg.Logger == nil {
		cfg.Logger = TestLogger(tb)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Start(ctx, cfg)
	if err != nil {
		tb.Fatalf("devserver: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Stop(); err != nil {
			tb.Errorf("devserver: stop: %v", err)
		}
	})
	return s
}

// TestLogger returns a logger that writes to tb's log until the test ends
// and drops records after that: server goroutines can outlive the test by a
// moment, and testing panics on a log call from a finished test.
func TestLogger(tb testing.TB) *slog.Logger {
	w := &testLogWriter{tb: tb}
	tb.Cleanup(func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.done = true
	})
	return slog.New(slog.NewTextHandler(w, nil))
}

type testLogWriter struct {
	mu   sync.Mutex
	tb   testing.TB
	done bool
}

func (w *testLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.tb.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}
