package keeltest

import (
	"testing"

	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/server/natsserver"
)

// StartNATSServer starts an embedded NATS server on a free port and shuts
// it down when tb ends.
func StartNATSServer(tb testing.TB) *natsserver.Server {
	tb.Helper()
	srv, err := natsserver.Start(natsserver.Options{Port: natsserver.RandomPort})
	if err != nil {
		tb.Fatalf("start NATS server: %v", err)
	}
	tb.Cleanup(srv.Shutdown)
	return srv
}

// DialNATS returns a NATS live channel on its own connection to url,
// closed when tb ends.
func DialNATS(tb testing.TB, url string, opts live.NATSOptions) *live.NATS {
	tb.Helper()
	ch, err := live.DialNATS(url, opts)
	if err != nil {
		tb.Fatalf("dial NATS: %v", err)
	}
	tb.Cleanup(func() { ch.Close() })
	return ch
}
