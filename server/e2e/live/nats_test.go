package live_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/internal/livetest"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/server/natsserver"
)

// The wire format is a plain JSON envelope on <prefix>.session.<id>, so any
// NATS client can read it, with the stream counter in a header.
func TestNATSWireFormat(t *testing.T) {
	srv := startNATSServer(t)
	raw := connect(t, srv.ClientURL())
	rawSub, err := raw.SubscribeSync("acme.live.session.s1")
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Flush(); err != nil {
		t.Fatal(err)
	}
	pub := dialNATS(t, srv.ClientURL(), live.NATSOptions{Prefix: "acme.live"})
	livetest.Publish(t, pub, "s1", 1, 2)

	var streams []string
	for i := 1; i <= 2; i++ {
		m, err := rawSub.NextMsg(livetest.Guard)
		if err != nil {
			t.Fatal(err)
		}
		var got keel.Envelope
		if err := json.Unmarshal(m.Data, &got); err != nil {
			t.Fatalf("payload %q is not an envelope: %v", m.Data, err)
		}
		if diff := cmp.Diff(livetest.Delta("s1", i), got); diff != "" {
			t.Errorf("envelope %d (-want +got):\n%s", i, diff)
		}
		stream, n, ok := strings.Cut(m.Header.Get(headerLive), " ")
		if !ok || n != strconv.Itoa(i) {
			t.Errorf("%s header = %q, want \"<stream> %d\"", headerLive, m.Header.Get(headerLive), i)
		}
		streams = append(streams, stream)
	}
	if streams[0] != streams[1] {
		t.Errorf("one publisher used two streams for one session: %q", streams)
	}
}

// Gaps are counted per publishing stream, from the counters on the wire.
func TestNATSCountsGapsPerStream(t *testing.T) {
	srv := startNATSServer(t)
	ch := dialNATS(t, srv.ClientURL(), live.NATSOptions{})
	sub := livetest.Subscribe(t, ch, "s1", 0)

	raw := connect(t, srv.ClientURL())
	send := func(header string, data string) {
		t.Helper()
		m := nats.NewMsg(live.Subject(live.DefaultPrefix, "s1"))
		if header != "" {
			m.Header.Set(headerLive, header)
		}
		m.Data = []byte(data)
		if err := raw.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	event := func(i int) string {
		b, err := json.Marshal(livetest.Delta("s1", i))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	send("A 1", event(1))
	send("B 1", event(2))
	send("A 2", event(3))
	send("B 2", event(4))
	send("A 5", event(5)) // A lost 3 and 4
	send("B 4", event(6)) // B lost 3
	send("A 5", event(7)) // a repeat: never shown twice
	send("C 7", event(8)) // a stream first seen mid-way: nothing known lost
	send("", event(9))    // a foreign publisher without counters
	send("A 6", "not json")
	send("A 7", event(10)) // A 6 came garbled: dropped, and the real A 6 is missed

	livetest.Expect(t, sub, []livetest.Step{
		{Event: 1}, {Event: 2}, {Event: 3}, {Event: 4},
		livetest.Lag(2), {Event: 5},
		livetest.Lag(1), {Event: 6},
		{Event: 8}, {Event: 9},
		livetest.Lag(1), {Event: 10},
	})
}

// When nats.go itself drops messages for a subscriber whose handler cannot
// keep up (a client-side slow consumer), the loss is reported exactly, and
// agrees with nats.go's own count.
func TestNATSClientSlowConsumerDropsAreLagged(t *testing.T) {
	srv := startNATSServer(t)
	// On a starved machine a 2 s write stall would reconnect a connection
	// and lose event 101 in the gap; this test is about nats.go's drops,
	// so the connections wait as long as the test does.
	patient := nats.FlusherTimeout(time.Minute)
	pub := dialNATS(t, srv.ClientURL(), live.NATSOptions{Dial: []nats.Option{patient}})
	// nats.go names the subscription it drops for, whose own count the
	// lag must agree with.
	slow := make(chan *nats.Subscription, 1)
	subCh := dialNATS(t, srv.ClientURL(), live.NATSOptions{PendingLimit: 4, Dial: []nats.Option{patient,
		nats.ErrorHandler(func(_ *nats.Conn, s *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrSlowConsumer) {
				select {
				case slow <- s:
				default:
				}
			}
		})}})
	entered := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	// The handler holds on after event 1, so the rest pile up in nats.go.
	sub := livetest.Subscribe(t, watched{subCh, func() {
		once.Do(func() {
			close(entered)
			<-release
		})
	}}, "s1", 0)

	livetest.PublishUnblocked(t, pub, "s1", 1, 100)
	if err := pub.Flush(livetest.GuardCtx(t)); err != nil {
		t.Fatal(err)
	}
	livetest.Wait(t, entered, "the handler to take event 1")
	// The server answers this ping after writing every message before it,
	// so nats.go has queued or dropped all 100 once it returns.
	if err := subCh.Conn().FlushWithContext(livetest.GuardCtx(t)); err != nil {
		t.Fatal(err)
	}
	ns := livetest.Wait(t, slow, "nats.go to report a slow consumer: the test did not overflow its pending limit")
	dropped, err := ns.Dropped()
	if err != nil {
		t.Fatal(err)
	}
	if dropped == 0 {
		t.Fatal("nats.go dropped nothing; the test did not overflow its pending limit")
	}
	close(release)
	// The events nats.go kept come first. Only then the next one: sent
	// while the handler still held event 1, it could meet the full pending
	// list and be dropped too, with nothing after it to show the loss.
	livetest.Expect(t, sub, livetest.Events(1, 100-dropped))

	// The loss is found when the publisher's next event arrives.
	livetest.Publish(t, pub, "s1", 101, 101)
	livetest.Expect(t, sub, []livetest.Step{livetest.Lag(dropped), {Event: 101}})
}

// A subscriber whose connection drops gets its subscription back when the
// connection comes back, and learns exactly how many events of a known
// publisher it missed meanwhile.
func TestNATSSubscriberReconnect(t *testing.T) {
	srv := startNATSServer(t)
	p := startProxy(t, srv.Server().Addr().String())
	pub := dialNATS(t, srv.ClientURL(), live.NATSOptions{})
	onDisconnect, disconnected := signal[*nats.Conn]()
	onReconnect, reconnected := signal[*nats.Conn]()
	subCh := dialNATS(t, p.url(), live.NATSOptions{Dial: []nats.Option{
		nats.ReconnectWait(10 * time.Millisecond),
		nats.ReconnectJitter(0, 0),
		nats.DisconnectErrHandler(func(nc *nats.Conn, _ error) { onDisconnect(nc) }),
		nats.ReconnectHandler(onReconnect),
	}})
	sub := livetest.Subscribe(t, subCh, "s1", 0)

	livetest.Publish(t, pub, "s1", 1, 10)
	livetest.Expect(t, sub, livetest.Events(1, 10))

	p.cut()
	livetest.Wait(t, disconnected, "the subscriber to notice the disconnect")
	// Told at once that events may be lost from here, how many unknown
	// (TestNATSDisconnectIsLaggedWithoutLaterEvents).
	livetest.Expect(t, sub, []livetest.Step{livetest.Lag(0)})
	livetest.Publish(t, pub, "s1", 11, 20) // nobody can receive these
	if err := pub.Flush(livetest.GuardCtx(t)); err != nil {
		t.Fatal(err)
	}

	p.restore()
	livetest.Wait(t, reconnected, "the subscriber to reconnect")
	// nats.go re-subscribes on reconnect; this round trip makes sure the
	// server has processed it.
	if err := subCh.Conn().FlushWithContext(livetest.GuardCtx(t)); err != nil {
		t.Fatal(err)
	}
	livetest.Publish(t, pub, "s1", 21, 30)
	livetest.Expect(t, sub, livetest.Concat([]livetest.Step{livetest.Lag(10)}, livetest.Events(21, 30)))
}

// A subscriber whose connection dropped is told it may have lost events
// even when nothing published later shows the gap: the events of a run
// that ended while the server was down are the last of their stream, so
// no counter ever jumps. TestClusterUnderFaults found followers missing a
// whole run's deltas without a Lagged while NATS was down.
func TestNATSDisconnectIsLaggedWithoutLaterEvents(t *testing.T) {
	srv := startNATSServer(t)
	p := startProxy(t, srv.Server().Addr().String())
	pub := dialNATS(t, srv.ClientURL(), live.NATSOptions{})
	onDisconnect, disconnected := signal[*nats.Conn]()
	subCh := dialNATS(t, p.url(), live.NATSOptions{Dial: []nats.Option{
		nats.ReconnectWait(10 * time.Millisecond),
		nats.ReconnectJitter(0, 0),
		nats.DisconnectErrHandler(func(nc *nats.Conn, _ error) { onDisconnect(nc) }),
	}})
	sub := livetest.Subscribe(t, subCh, "s1", 0)

	livetest.Publish(t, pub, "s1", 1, 10)
	livetest.Expect(t, sub, livetest.Events(1, 10))

	p.cut()
	// The channel's own handler runs after the caller's: the lag may be
	// recorded a moment after this wakes, and Expect waits for it.
	livetest.Wait(t, disconnected, "the subscriber to notice the disconnect")
	livetest.Publish(t, pub, "s1", 11, 20) // the last of the stream; nobody receives them
	livetest.Expect(t, sub, []livetest.Step{livetest.Lag(0)})
}

// Subscribe does not wait for a server that is out of reach: a client
// following a session's durable events subscribes first, and was held
// until NATS came back (TestClusterUnderFaults: with NATS down for 30 s,
// followers that started meanwhile got their run's every durable event
// 30 s late). The subscription says it may have missed events, and works
// once the connection is back.
func TestNATSSubscribeWhileDisconnected(t *testing.T) {
	srv := startNATSServer(t)
	p := startProxy(t, srv.Server().Addr().String())
	pub := dialNATS(t, srv.ClientURL(), live.NATSOptions{})
	onDisconnect, disconnected := signal[*nats.Conn]()
	onReconnect, reconnected := signal[*nats.Conn]()
	subCh := dialNATS(t, p.url(), live.NATSOptions{Dial: []nats.Option{
		nats.ReconnectWait(10 * time.Millisecond),
		nats.ReconnectJitter(0, 0),
		nats.DisconnectErrHandler(func(nc *nats.Conn, _ error) { onDisconnect(nc) }),
		nats.ReconnectHandler(onReconnect),
	}})
	p.cut()
	livetest.Wait(t, disconnected, "the subscriber to notice the disconnect")

	// A deadline far beyond the test's guard: only a Subscribe that does
	// not wait for the server returns in time.
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	subscribed := make(chan live.Subscription, 1)
	go func() {
		sub, err := subCh.Subscribe(ctx, "s1", live.SubscribeOptions{})
		if err != nil {
			t.Errorf("Subscribe while disconnected: %v", err)
		}
		subscribed <- sub
	}()
	sub := livetest.Wait(t, subscribed, "Subscribe to return while the server is out of reach")
	if sub == nil {
		return
	}
	t.Cleanup(func() { _ = sub.Close() })
	livetest.Expect(t, sub, []livetest.Step{livetest.Lag(0)})

	p.restore()
	livetest.Wait(t, reconnected, "the subscriber to reconnect")
	if err := subCh.Conn().FlushWithContext(livetest.GuardCtx(t)); err != nil {
		t.Fatal(err)
	}
	livetest.Publish(t, pub, "s1", 1, 3)
	livetest.Expect(t, sub, livetest.Events(1, 3))
}

// stallVolume events of bulk bytes (16 MiB) are far more than the socket
// buffers between a client and a stalled proxy hold (4 MiB + 64 KiB), so
// publishing them backs the connection up for certain.
const (
	stallVolume = 1024
	bulk        = 16 << 10
)

// A server that stops reading (stalled, not gone) never blocks Publish:
// events that do not fit the publish queue are dropped, and subscribers
// count every one of them.
func TestNATSStalledServerNeverBlocksPublish(t *testing.T) {
	srv := startNATSServer(t)
	p := startProxy(t, srv.Server().Addr().String())
	pub := dialNATS(t, p.url(), live.NATSOptions{
		PublishQueue: 16,
		// Keep the stalled connection (rather than reconnect and lose what
		// sits in the socket) so the only losses are the queue's.
		Dial: []nats.Option{nats.FlusherTimeout(time.Minute)},
	})
	subCh := dialNATS(t, srv.ClientURL(), live.NATSOptions{})
	sub := livetest.Subscribe(t, subCh, "s1", 1<<16)

	const marker = -1
	type tally struct{ received, missed int }
	result := make(chan tally, 1)
	go func() {
		var got tally
		last := 0
		for {
			env, err := sub.Next(context.Background())
			var lagged *live.LaggedError
			switch {
			case errors.As(err, &lagged):
				got.missed += lagged.Missed
				last += lagged.Missed
				continue
			case err != nil:
				t.Errorf("Next: %v", err)
				result <- got
				return
			}
			i, _ := livetest.IndexOf(env)
			if i == marker {
				result <- got
				return
			}
			if i != last+1 {
				t.Errorf("event %d after %d (with lag counted)", i, last)
			}
			last = i
			got.received++
		}
	}()

	// Made before the stall: what is timed is Publish alone.
	envs := make([]keel.Envelope, stallVolume)
	for n := range envs {
		envs[n] = livetest.PaddedDelta("s1", n+1, bulk)
	}
	p.stall()
	published := make(chan int, 1)
	go func() {
		// Far more than the socket buffers between client and proxy hold.
		n := 0
		for ; n < stallVolume; n++ {
			if err := pub.Publish(context.Background(), envs[n]); err != nil {
				t.Errorf("Publish: %v", err)
				break
			}
		}
		published <- n
	}()
	total := livetest.Wait(t, published, "Publish to return while the server is stalled")
	dropped := pub.Dropped()
	if dropped == 0 {
		t.Fatal("nothing was dropped: the stalled connection never backed up")
	}

	p.unstall()
	if err := pub.Flush(livetest.GuardCtx(t)); err != nil {
		t.Fatal(err)
	}
	// The marker comes from the same stream, so a loss at the very end is
	// counted too.
	if err := pub.Publish(t.Context(), livetest.Delta("s1", marker)); err != nil {
		t.Fatal(err)
	}
	got := livetest.Wait(t, result, "the marker event")
	if got.missed != int(dropped) || got.received+got.missed != total {
		t.Errorf("published %d, dropped %d; subscriber received %d and was told of %d missed",
			total, dropped, got.received, got.missed)
	}
}

// With the server gone, Publish still returns at once (nats.go buffers, then
// refuses), and Close does not hang.
func TestNATSServerDownNeverBlocksPublish(t *testing.T) {
	srv := startNATSServer(t)
	onDisconnect, disconnected := signal[*nats.Conn]()
	pub, err := live.DialNATS(srv.ClientURL(), live.NATSOptions{
		CloseTimeout: 50 * time.Millisecond,
		Dial: []nats.Option{
			nats.ReconnectBufSize(64 << 10),
			nats.DisconnectErrHandler(func(nc *nats.Conn, _ error) { onDisconnect(nc) }),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv.Shutdown()
	livetest.Wait(t, disconnected, "the publisher to notice the server is gone")

	big := livetest.PaddedDelta("s1", 1, 1<<10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		// 1 MiB: well past the 64 KiB reconnect buffer.
		for range 1024 {
			if err := pub.Publish(context.Background(), big); err != nil {
				t.Errorf("Publish: %v", err)
				return
			}
		}
		pub.Close()
	}()
	livetest.Wait(t, done, "Publish and Close to return while the server is down")
	if pub.Dropped() == 0 {
		t.Error("Dropped() = 0 after overflowing the reconnect buffer")
	}
}

// NewNATS leaves the caller's connection alone on Close, and a subscription
// ends (after what it buffered) when that connection closes.
func TestNATSCallerOwnsConnection(t *testing.T) {
	srv := startNATSServer(t)
	pub := dialNATS(t, srv.ClientURL(), live.NATSOptions{})
	nc := connect(t, srv.ClientURL())
	ch, err := live.NewNATS(nc, live.NATSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var handled atomic.Int64
	three := make(chan struct{})
	sub := livetest.Subscribe(t, watched{ch, func() {
		if handled.Add(1) == 3 {
			close(three)
		}
	}}, "s1", 0)
	livetest.Publish(t, pub, "s1", 1, 3)
	livetest.Wait(t, three, "three events")

	nc.Close()
	livetest.Expect(t, sub, livetest.Concat(livetest.Events(1, 3), []livetest.Step{livetest.Closed()}))

	other, err := live.NewNATS(connect(t, srv.ClientURL()), live.NATSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	if !other.Conn().IsConnected() {
		t.Error("Close closed a connection it did not open")
	}
}

// An in-process connection (no TCP) works like any other.
func TestNATSInProcessConnection(t *testing.T) {
	srv := startNATSServer(t)
	inproc := dialNATS(t, srv.ClientURL(), live.NATSOptions{Dial: []nats.Option{nats.InProcessServer(srv)}})
	tcp := dialNATS(t, srv.ClientURL(), live.NATSOptions{})
	sub := livetest.Subscribe(t, inproc, "s1", 0)
	livetest.Publish(t, tcp, "s1", 1, 5)
	livetest.Expect(t, sub, livetest.Events(1, 5))
}

func TestNATSOptionErrors(t *testing.T) {
	if _, err := live.NewNATS(nil, live.NATSOptions{}); err == nil {
		t.Error("live.NewNATS(nil) succeeded")
	}
	srv := startNATSServer(t)
	nc := connect(t, srv.ClientURL())
	for _, prefix := range []string{"a..b", ".a", "a.", "a.*", "a.>", "a b"} {
		if _, err := live.NewNATS(nc, live.NATSOptions{Prefix: prefix}); err == nil {
			t.Errorf("live.NewNATS with prefix %q succeeded", prefix)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	if _, err := live.DialNATS("nats://"+addr, live.NATSOptions{}); err == nil {
		t.Errorf("live.DialNATS to %s, where nothing listens, succeeded", addr)
	}
}

// Close gives up on a stalled connection instead of hanging the caller.
func TestNATSCloseOnStalledServerIsBounded(t *testing.T) {
	srv := startNATSServer(t)
	p := startProxy(t, srv.Server().Addr().String())
	// DialNATS's own write timeout bounds how long closing the connection
	// can take; nats.go's default (1 minute) would trip the livetest.Guard.
	pub, err := live.DialNATS(p.url(), live.NATSOptions{PublishQueue: 16, CloseTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	p.stall()
	env := livetest.PaddedDelta("s1", 1, bulk)
	for range stallVolume {
		if err := pub.Publish(t.Context(), env); err != nil {
			t.Fatal(err)
		}
	}
	closed := make(chan struct{})
	go func() {
		pub.Close()
		close(closed)
	}()
	livetest.Wait(t, closed, "Close on a stalled connection")
}

// A publisher may start before its server (nats.RetryOnFailedConnect, as
// `keel worker` does): Publish works throughout, and once connected the
// events flow, with nothing before the first received event reported.
func TestNATSPublisherStartsBeforeServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()

	onConnect, connected := signal[*nats.Conn]()
	pub, err := live.DialNATS("nats://"+l.Addr().String(), live.NATSOptions{Dial: []nats.Option{
		nats.RetryOnFailedConnect(true),
		nats.ReconnectWait(10 * time.Millisecond),
		nats.ConnectHandler(onConnect),
		nats.ReconnectHandler(onConnect), // nats.go calls this one when a retried first connect succeeds
	}})
	if err != nil {
		t.Fatalf("live.DialNATS with nothing listening: %v", err)
	}
	t.Cleanup(func() { pub.Close() })
	livetest.PublishUnblocked(t, pub, "s1", 1, 5) // nowhere to go yet

	srv, err := natsserver.Start(natsserver.Options{Port: port})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	livetest.Wait(t, connected, "the publisher to connect")
	sub := livetest.Subscribe(t, dialNATS(t, srv.ClientURL(), live.NATSOptions{}), "s1", 0)
	livetest.Publish(t, pub, "s1", 6, 8)
	livetest.Expect(t, sub, livetest.Events(6, 8))
}
