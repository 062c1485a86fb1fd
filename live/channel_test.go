package live

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/keelrun/keel"

	"github.com/keelrun/keel/live/natsserver"
)

// guard bounds every wait in these tests. It only turns a hang into a
// failure; no test waits for it to pass.
const guard = 10 * time.Second

// rig is one Channel implementation under test: sub subscribes, pub
// publishes (for NATS, over another connection).
type rig struct {
	sub, pub Channel
	// newPublisher returns another independent publisher (for NATS, with
	// its own connection and streams).
	newPublisher func(t *testing.T) Publisher
	// settle returns once subscribers have handled n messages in total
	// since the rig was made. In process, Publish has already done so.
	settle func(t *testing.T, n int)
}

func memoryRig(t *testing.T) *rig {
	m := NewMemory()
	t.Cleanup(func() { m.Close() })
	return &rig{
		sub: m, pub: m,
		newPublisher: func(*testing.T) Publisher { return m },
		settle:       func(*testing.T, int) {},
	}
}

func natsRig(t *testing.T) *rig {
	srv := startNATSServer(t)
	pub := dialNATS(t, srv.ClientURL(), NATSOptions{})
	sub := dialNATS(t, srv.ClientURL(), NATSOptions{})
	var handled atomic.Int64
	progress := make(chan struct{}, 1)
	sub.afterHandle = func() {
		handled.Add(1)
		select {
		case progress <- struct{}{}:
		default:
		}
	}
	return &rig{
		sub: sub, pub: pub,
		newPublisher: func(t *testing.T) Publisher { return dialNATS(t, srv.ClientURL(), NATSOptions{}) },
		settle: func(t *testing.T, n int) {
			t.Helper()
			ctx, cancel := context.WithTimeout(t.Context(), guard)
			defer cancel()
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

func startNATSServer(t testing.TB) *natsserver.Server {
	t.Helper()
	srv, err := natsserver.Start(natsserver.Options{Port: natsserver.RandomPort})
	if err != nil {
		t.Fatalf("start NATS server: %v", err)
	}
	t.Cleanup(srv.Shutdown)
	return srv
}

func dialNATS(t testing.TB, url string, opts NATSOptions) *NATS {
	t.Helper()
	c, err := DialNATS(url, opts)
	if err != nil {
		t.Fatalf("DialNATS: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// forEachChannel runs test against every implementation.
func forEachChannel(t *testing.T, test func(t *testing.T, r *rig)) {
	t.Run("memory", func(t *testing.T) { test(t, memoryRig(t)) })
	t.Run("nats", func(t *testing.T) { test(t, natsRig(t)) })
}

func subscribe(t *testing.T, ch Channel, sessionID string, buffer int) Subscription {
	t.Helper()
	sub, err := ch.Subscribe(t.Context(), sessionID, SubscribeOptions{Buffer: buffer})
	if err != nil {
		t.Fatalf("Subscribe(%s): %v", sessionID, err)
	}
	t.Cleanup(func() { sub.Close() })
	return sub
}

func publish(t *testing.T, p Publisher, sessionID string, from, to int) {
	t.Helper()
	for i := from; i <= to; i++ {
		if err := p.Publish(t.Context(), delta(sessionID, i)); err != nil {
			t.Fatalf("Publish %d: %v", i, err)
		}
	}
}

// publishUnblocked publishes from another goroutine and fails the test if
// the publisher does not finish: it must never wait for a subscriber.
func publishUnblocked(t *testing.T, p Publisher, sessionID string, from, to int) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		for i := from; i <= to; i++ {
			if err := p.Publish(context.Background(), delta(sessionID, i)); err != nil {
				done <- fmt.Errorf("Publish %d: %w", i, err)
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(guard):
		t.Fatalf("publisher blocked: %d publishes did not finish while the subscriber read nothing", to-from+1)
	}
}

func expect(t *testing.T, sub Subscription, want []step) {
	t.Helper()
	got := drain(t, sub.Next, len(want))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
}

// expectNothing asserts that no event is waiting. It can only be trusted
// after settle.
func expectNothing(t *testing.T, sub Subscription) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if env, err := sub.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Next = %+v, %v; want nothing", env, err)
	}
}

func TestChannelOrder(t *testing.T) {
	forEachChannel(t, func(t *testing.T, r *rig) {
		sub := subscribe(t, r.sub, "s1", 0)
		publish(t, r.pub, "s1", 1, 1000)
		expect(t, sub, events(1, 1000))
	})
}

func TestChannelDeliversEnvelopeUnchanged(t *testing.T) {
	forEachChannel(t, func(t *testing.T, r *rig) {
		sub := subscribe(t, r.sub, "s1", 0)
		want := delta("s1", 42)
		want.Data = []byte(`{"step":1,"attempt":0,"text":"héllo\n"}`)
		if err := r.pub.Publish(t.Context(), want); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), guard)
		defer cancel()
		got, err := sub.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("envelope (-want +got):\n%s", diff)
		}
	})
}

func TestChannelMultipleSubscribers(t *testing.T) {
	forEachChannel(t, func(t *testing.T, r *rig) {
		a := subscribe(t, r.sub, "s1", 0)
		b := subscribe(t, r.sub, "s1", 0)
		publish(t, r.pub, "s1", 1, 100)
		expect(t, a, events(1, 100))
		expect(t, b, events(1, 100))
	})
}

func TestChannelIsolatesSessions(t *testing.T) {
	forEachChannel(t, func(t *testing.T, r *rig) {
		s1 := subscribe(t, r.sub, "s1", 0)
		s2 := subscribe(t, r.sub, "s2", 0)
		publish(t, r.pub, "s2", 1, 3)
		publish(t, r.pub, "s1", 10, 12)
		// One publisher keeps its order, so anything of s2 leaking into s1
		// would show up before 10.
		publish(t, r.pub, "s2", 4, 4)
		expect(t, s1, events(10, 12))
		expect(t, s2, events(1, 4))
	})
}

// A subscriber that reads nothing never holds up the publisher, and learns
// exactly what it lost, once per overflow.
func TestChannelSlowSubscriberLagsExactly(t *testing.T) {
	forEachChannel(t, func(t *testing.T, r *rig) {
		const buffer = 16
		slow := subscribe(t, r.sub, "s1", buffer)
		fast := subscribe(t, r.sub, "s1", 4096)
		publishUnblocked(t, r.pub, "s1", 1, 1000)
		r.settle(t, 2*1000)

		expect(t, fast, events(1, 1000))
		expect(t, slow, concat([]step{lag(1000 - buffer)}, events(1000-buffer+1, 1000)))
		expectNothing(t, slow)

		// It continues without a report while it keeps up, and the next
		// overflow is reported again with its own count.
		publish(t, r.pub, "s1", 1001, 1001)
		expect(t, slow, events(1001, 1001))
		publishUnblocked(t, r.pub, "s1", 1002, 1002+buffer+4)
		r.settle(t, 2*(1002+buffer+4))
		expect(t, slow, concat([]step{lag(5)}, events(1007, 1002+buffer+4)))
	})
}

// Each publisher's events keep their order when several publish to one
// session at once, and none of them is reported lost.
func TestChannelConcurrentPublishersKeepTheirOrder(t *testing.T) {
	forEachChannel(t, func(t *testing.T, r *rig) {
		const publishers, each = 4, 250
		sub := subscribe(t, r.sub, "s1", publishers*each)
		var wg sync.WaitGroup
		for p := range publishers {
			pub := r.newPublisher(t)
			wg.Go(func() {
				for i := range each {
					env := delta("s1", p*each+i)
					if err := pub.Publish(context.Background(), env); err != nil {
						t.Errorf("Publish: %v", err)
						return
					}
				}
			})
		}
		wg.Wait()
		last := make([]int, publishers)
		for p := range last {
			last[p] = -1
		}
		for _, s := range drain(t, sub.Next, publishers*each) {
			if s.Missed != 0 || s.Err != "" {
				t.Fatalf("got %+v, want only events", s)
			}
			p, i := s.Event/each, s.Event%each
			if i != last[p]+1 {
				t.Fatalf("publisher %d: event %d after %d", p, i, last[p])
			}
			last[p] = i
		}
	})
}

func TestChannelNextHonoursContext(t *testing.T) {
	forEachChannel(t, func(t *testing.T, r *rig) {
		sub := subscribe(t, r.sub, "s1", 0)

		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() {
			_, err := sub.Next(ctx)
			errc <- err
		}()
		cancel()
		select {
		case err := <-errc:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Next after cancel = %v, want context.Canceled", err)
			}
		case <-time.After(guard):
			t.Fatal("Next did not return after its context was cancelled")
		}

		// The subscription still works afterwards.
		publish(t, r.pub, "s1", 1, 1)
		expect(t, sub, events(1, 1))
	})
}

func TestChannelSubscriptionClose(t *testing.T) {
	forEachChannel(t, func(t *testing.T, r *rig) {
		gone := subscribe(t, r.sub, "s1", 0)
		stays := subscribe(t, r.sub, "s1", 0)
		publish(t, r.pub, "s1", 1, 3)
		r.settle(t, 2*3)

		// A blocked Next returns when its subscription closes.
		empty := subscribe(t, r.sub, "s2", 0)
		errc := make(chan error, 1)
		go func() {
			_, err := empty.Next(context.Background())
			errc <- err
		}()
		if err := empty.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-errc:
			if !errors.Is(err, ErrClosed) {
				t.Errorf("blocked Next after Close = %v, want ErrClosed", err)
			}
		case <-time.After(guard):
			t.Fatal("blocked Next did not return after Close")
		}

		// Closing discards what was buffered, and is idempotent.
		if err := gone.Close(); err != nil {
			t.Fatal(err)
		}
		if err := gone.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		expect(t, gone, []step{closed(), closed()})

		// The others and the channel carry on.
		publish(t, r.pub, "s1", 4, 5)
		expect(t, stays, events(1, 5))
	})
}

func TestChannelClose(t *testing.T) {
	forEachChannel(t, func(t *testing.T, r *rig) {
		sub := subscribe(t, r.sub, "s1", 4)
		publish(t, r.pub, "s1", 1, 6)
		r.settle(t, 6)

		if err := r.sub.Close(); err != nil {
			t.Fatal(err)
		}
		if err := r.sub.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		// What was buffered, including the lag report, is still read.
		expect(t, sub, concat([]step{lag(2)}, events(3, 6), []step{closed(), closed()}))

		if err := r.sub.Publish(t.Context(), delta("s1", 7)); !errors.Is(err, ErrClosed) {
			t.Errorf("Publish after Close = %v, want ErrClosed", err)
		}
		if _, err := r.sub.Subscribe(t.Context(), "s1", SubscribeOptions{}); !errors.Is(err, ErrClosed) {
			t.Errorf("Subscribe after Close = %v, want ErrClosed", err)
		}
	})
}

func TestChannelRejectsInvalidSessionIDs(t *testing.T) {
	forEachChannel(t, func(t *testing.T, r *rig) {
		for _, id := range []string{"", "a.b", "a*", ">", "a b"} {
			if err := r.pub.Publish(t.Context(), delta(id, 1)); !errors.Is(err, keel.ErrInvalidInput) {
				t.Errorf("Publish(%q) = %v, want ErrInvalidInput", id, err)
			}
			if _, err := r.sub.Subscribe(t.Context(), id, SubscribeOptions{}); !errors.Is(err, keel.ErrInvalidInput) {
				t.Errorf("Subscribe(%q) = %v, want ErrInvalidInput", id, err)
			}
		}
	})
}

// Memory copies the payload once, so a publisher may reuse its buffer.
func TestMemoryPublisherMayReuseData(t *testing.T) {
	m := NewMemory()
	defer m.Close()
	sub := subscribe(t, m, "s1", 0)
	env := delta("s1", 1)
	if err := m.Publish(t.Context(), env); err != nil {
		t.Fatal(err)
	}
	env.Data[0] = '9'
	expect(t, sub, events(1, 1))
}
