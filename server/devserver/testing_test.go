package devserver

import (
	"context"
	"testing"
	"time"

	"github.com/keelrun/keel/internal/testlog"
)

// StartForTest starts a server for this package's tests (the others use
// server/internal/keeltest) and stops it when the test ends.
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
		cfg.Logger = testlog.New(tb)
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
