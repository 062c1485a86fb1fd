package natsserver_test

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/keelrun/keel/live/natsserver"
)

func TestStart(t *testing.T) {
	t.Run("taken port", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		port := l.Addr().(*net.TCPAddr).Port
		_, err = natsserver.Start(natsserver.Options{Port: port, ReadyTimeout: 5 * time.Second})
		if err == nil || !strings.Contains(err.Error(), "cannot listen") {
			t.Errorf("Start on a taken port = %v, want a listen error", err)
		}
	})
	t.Run("all interfaces", func(t *testing.T) {
		srv, err := natsserver.Start(natsserver.Options{Host: "0.0.0.0", Port: natsserver.RandomPort})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Shutdown()
		if !strings.HasPrefix(srv.ClientURL(), "nats://127.0.0.1:") {
			t.Errorf("ClientURL() = %q, want a loopback URL", srv.ClientURL())
		}
		nc, err := nats.Connect(srv.ClientURL())
		if err != nil {
			t.Fatalf("connect to %s: %v", srv.ClientURL(), err)
		}
		nc.Close()
		srv.Shutdown()
		srv.Shutdown() // idempotent
	})
}
