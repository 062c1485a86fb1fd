// Package testlog sends a server's logs to a test's log, where they show
// when the test fails.
package testlog

import (
	"strings"
	"sync"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/keelrun/keel/logging"
)

// New returns a logger that writes info records and above to tb's log
// until the test ends and drops records after that: server goroutines can
// outlive the test by a moment, and testing panics on a log call from a
// finished test.
func New(tb testing.TB) *zap.Logger {
	w := &testLogWriter{tb: tb}
	tb.Cleanup(func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.done = true
	})
	l, err := logging.New(logging.Options{Format: logging.FormatConsole, Level: zapcore.InfoLevel, Output: w})
	if err != nil {
		tb.Fatal(err)
	}
	return l
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
