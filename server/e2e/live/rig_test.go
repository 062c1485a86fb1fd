// Package live_test tests the live channel over NATS against a real NATS
// server: the server module's, since the root module, where package live
// is, requires no NATS server (docs/ARCHITECTURE.md, "Modules"). The
// in-process channel's tests, and the behaviour every channel shares
// (internal/livetest), are in live itself.
package live_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/keelrun/keel/internal/livehook"
	"github.com/keelrun/keel/internal/livetest"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/server/natsserver"
)

// headerLive is the header of a plaintext event's stream counter
// (docs/live.md, "Across processes").
const headerLive = "Keel-Live"

func startNATSServer(t testing.TB) *natsserver.Server {
	t.Helper()
	srv, err := natsserver.Start(natsserver.Options{Port: natsserver.RandomPort})
	if err != nil {
		t.Fatalf("start NATS server: %v", err)
	}
	t.Cleanup(srv.Shutdown)
	return srv
}

func dialNATS(t testing.TB, url string, opts live.NATSOptions) *live.NATS {
	t.Helper()
	c, err := live.DialNATS(url, opts)
	if err != nil {
		t.Fatalf("DialNATS: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func connect(t *testing.T, url string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// watched is a NATS channel whose subscriptions call handled after each
// message they handle (internal/livehook).
type watched struct {
	*live.NATS
	handled func()
}

func (w watched) Subscribe(ctx context.Context, sessionID string, opts live.SubscribeOptions) (live.Subscription, error) {
	return w.NATS.Subscribe(livehook.WithHandled(ctx, w.handled), sessionID, opts)
}

// signal returns a callback that sends to the returned channel without
// ever blocking nats.go's callback goroutine.
func signal[A any]() (func(A), <-chan struct{}) {
	c := make(chan struct{}, 1)
	return func(A) {
		select {
		case c <- struct{}{}:
		default:
		}
	}, c
}

// natsRig publishes and subscribes over two connections to one server;
// Settle counts what the subscriptions handled.
func natsRig(t *testing.T) *livetest.Rig {
	srv := startNATSServer(t)
	pub := dialNATS(t, srv.ClientURL(), live.NATSOptions{})
	var handled atomic.Int64
	progress := make(chan struct{}, 1)
	sub := watched{dialNATS(t, srv.ClientURL(), live.NATSOptions{}), func() {
		handled.Add(1)
		select {
		case progress <- struct{}{}:
		default:
		}
	}}
	return &livetest.Rig{
		Sub: sub, Pub: pub,
		NewPublisher: func(t *testing.T) live.Publisher { return dialNATS(t, srv.ClientURL(), live.NATSOptions{}) },
		Settle: func(t *testing.T, n int) {
			t.Helper()
			ctx := livetest.GuardCtx(t)
			if err := pub.Flush(ctx); err != nil {
				t.Fatalf("Flush: %v", err)
			}
			for handled.Load() < int64(n) {
				select {
				case <-progress:
				case <-ctx.Done():
					t.Fatalf("subscribers handled %d messages, want %d", handled.Load(), n)
				}
			}
		},
	}
}

func TestNATSChannel(t *testing.T) {
	livetest.RunChannelTests(t, natsRig)
}

// Cancel notices reach every listener on the channel from another
// connection, and stop reaching one once it stops listening.
func TestNATSCancelNotices(t *testing.T) {
	srv := startNATSServer(t)
	from := dialNATS(t, srv.ClientURL(), live.NATSOptions{Prefix: "acme"})
	to := dialNATS(t, srv.ClientURL(), live.NATSOptions{Prefix: "acme"})
	livetest.RunCancelNoticeTests(t, from, to, to.Conn().Flush)
}
