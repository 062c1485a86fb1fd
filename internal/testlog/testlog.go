// Package testlog sends a server's logs to a test's log, where they show
// when the test fails.
package testlog

import (
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// New returns a logger that writes to tb's log until the test ends
// and drops records after that: server goroutines can outlive the test by a
// moment, and testing panics on a log call from a finished test.
func New(tb testing.TB) *slog.Logger {
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
