package livetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/live"
)

// Rig is one Channel implementation under test: Sub subscribes, Pub
// publishes (for NATS, over another connection).
type Rig struct {
	Sub, Pub live.Channel
	// NewPublisher returns another independent publisher (for NATS, with
	// its own connection and streams).
	NewPublisher func(t *testing.T) live.Publisher
	// Settle returns once Sub's subscriptions have handled n messages in
	// total since the rig was made. In process, Publish has already done
	// so.
	Settle func(t *testing.T, n int)
}

// RunChannelTests runs the behaviour every Channel must have, each test on
// a rig of its own from newRig.
func RunChannelTests(t *testing.T, newRig func(t *testing.T) *Rig) {
	for _, tc := range []struct {
		name string
		test func(t *testing.T, r *Rig)
	}{
		{"Order", channelOrder},
		{"DeliversEnvelopeUnchanged", channelDeliversEnvelopeUnchanged},
		{"DeliversDataWithoutLineBreaks", channelDeliversDataWithoutLineBreaks},
		{"MultipleSubscribers", channelMultipleSubscribers},
		{"IsolatesSessions", channelIsolatesSessions},
		{"SlowSubscriberLagsExactly", channelSlowSubscriberLagsExactly},
		{"ConcurrentPublishersKeepTheirOrder", channelConcurrentPublishersKeepTheirOrder},
		{"NextHonoursContext", channelNextHonoursContext},
		{"SubscriptionClose", channelSubscriptionClose},
		{"Close", channelClose},
		{"RejectsInvalidSessionIDs", channelRejectsInvalidSessionIDs},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.test(t, newRig(t)) })
	}
}

func channelOrder(t *testing.T, r *Rig) {
	sub := Subscribe(t, r.Sub, "s1", 0)
	Publish(t, r.Pub, "s1", 1, 1000)
	Expect(t, sub, Events(1, 1000))
}

func channelDeliversEnvelopeUnchanged(t *testing.T, r *Rig) {
	sub := Subscribe(t, r.Sub, "s1", 0)
	want := Delta("s1", 42)
	want.Data = []byte(`{"step":1,"attempt":0,"text":"héllo\n"}`)
	if err := r.Pub.Publish(t.Context(), want); err != nil {
		t.Fatal(err)
	}
	got, err := sub.Next(GuardCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("envelope (-want +got):\n%s", diff)
	}
}

// Line breaks between the data's JSON tokens are valid JSON, but a reader
// that writes the data out as one line (an SSE data line) must never get
// one: the channel delivers the data compact.
func channelDeliversDataWithoutLineBreaks(t *testing.T, r *Rig) {
	sub := Subscribe(t, r.Sub, "s1", 0)
	env := Delta("s1", 1)
	env.Data = []byte("{\"step\":1,\r\n\"text\":\"1\"\n\n}")
	if err := r.Pub.Publish(t.Context(), env); err != nil {
		t.Fatal(err)
	}
	got, err := sub.Next(GuardCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Data) != `{"step":1,"text":"1"}` {
		t.Errorf("data = %q, want it compact", got.Data)
	}
}

func channelMultipleSubscribers(t *testing.T, r *Rig) {
	a := Subscribe(t, r.Sub, "s1", 0)
	b := Subscribe(t, r.Sub, "s1", 0)
	Publish(t, r.Pub, "s1", 1, 100)
	Expect(t, a, Events(1, 100))
	Expect(t, b, Events(1, 100))
}

func channelIsolatesSessions(t *testing.T, r *Rig) {
	s1 := Subscribe(t, r.Sub, "s1", 0)
	s2 := Subscribe(t, r.Sub, "s2", 0)
	Publish(t, r.Pub, "s2", 1, 3)
	Publish(t, r.Pub, "s1", 10, 12)
	// One publisher keeps its order, so anything of s2 leaking into s1
	// would show up before 10.
	Publish(t, r.Pub, "s2", 4, 4)
	Expect(t, s1, Events(10, 12))
	Expect(t, s2, Events(1, 4))
}

// A subscriber that reads nothing never holds up the publisher, and learns
// exactly what it lost, once per overflow.
func channelSlowSubscriberLagsExactly(t *testing.T, r *Rig) {
	const buffer = 16
	slow := Subscribe(t, r.Sub, "s1", buffer)
	fast := Subscribe(t, r.Sub, "s1", 4096)
	PublishUnblocked(t, r.Pub, "s1", 1, 1000)
	r.Settle(t, 2*1000)

	Expect(t, fast, Events(1, 1000))
	Expect(t, slow, Concat([]Step{Lag(1000 - buffer)}, Events(1000-buffer+1, 1000)))
	ExpectNothing(t, slow)

	// It continues without a report while it keeps up, and the next
	// overflow is reported again with its own count.
	Publish(t, r.Pub, "s1", 1001, 1001)
	Expect(t, slow, Events(1001, 1001))
	PublishUnblocked(t, r.Pub, "s1", 1002, 1002+buffer+4)
	r.Settle(t, 2*(1002+buffer+4))
	Expect(t, slow, Concat([]Step{Lag(5)}, Events(1007, 1002+buffer+4)))
}

// Each publisher's events keep their order when several publish to one
// session at once, and none of them is reported lost.
func channelConcurrentPublishersKeepTheirOrder(t *testing.T, r *Rig) {
	const publishers, each = 4, 250
	sub := Subscribe(t, r.Sub, "s1", publishers*each)
	var wg sync.WaitGroup
	for p := range publishers {
		pub := r.NewPublisher(t)
		wg.Go(func() {
			for i := range each {
				env := Delta("s1", p*each+i)
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
	for _, s := range Drain(t, sub.Next, publishers*each) {
		if s.Missed != 0 || s.Err != "" {
			t.Fatalf("got %+v, want only events", s)
		}
		p, i := s.Event/each, s.Event%each
		if i != last[p]+1 {
			t.Fatalf("publisher %d: event %d after %d", p, i, last[p])
		}
		last[p] = i
	}
}

func channelNextHonoursContext(t *testing.T, r *Rig) {
	sub := Subscribe(t, r.Sub, "s1", 0)

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
	case <-time.After(Guard):
		t.Fatal("Next did not return after its context was cancelled")
	}

	// The subscription still works afterwards.
	Publish(t, r.Pub, "s1", 1, 1)
	Expect(t, sub, Events(1, 1))
}

func channelSubscriptionClose(t *testing.T, r *Rig) {
	gone := Subscribe(t, r.Sub, "s1", 0)
	stays := Subscribe(t, r.Sub, "s1", 0)
	Publish(t, r.Pub, "s1", 1, 3)
	r.Settle(t, 2*3)

	// A blocked Next returns when its subscription closes.
	empty := Subscribe(t, r.Sub, "s2", 0)
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
		if !errors.Is(err, live.ErrClosed) {
			t.Errorf("blocked Next after Close = %v, want ErrClosed", err)
		}
	case <-time.After(Guard):
		t.Fatal("blocked Next did not return after Close")
	}

	// Closing discards what was buffered, and is idempotent.
	if err := gone.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gone.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	Expect(t, gone, []Step{Closed(), Closed()})

	// The others and the channel carry on.
	Publish(t, r.Pub, "s1", 4, 5)
	Expect(t, stays, Events(1, 5))
}

func channelClose(t *testing.T, r *Rig) {
	sub := Subscribe(t, r.Sub, "s1", 4)
	Publish(t, r.Pub, "s1", 1, 6)
	r.Settle(t, 6)

	if err := r.Sub.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Sub.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	// What was buffered, including the lag report, is still read.
	Expect(t, sub, Concat([]Step{Lag(2)}, Events(3, 6), []Step{Closed(), Closed()}))

	if err := r.Sub.Publish(t.Context(), Delta("s1", 7)); !errors.Is(err, live.ErrClosed) {
		t.Errorf("Publish after Close = %v, want ErrClosed", err)
	}
	if _, err := r.Sub.Subscribe(t.Context(), "s1", live.SubscribeOptions{}); !errors.Is(err, live.ErrClosed) {
		t.Errorf("Subscribe after Close = %v, want ErrClosed", err)
	}
}

func channelRejectsInvalidSessionIDs(t *testing.T, r *Rig) {
	for _, id := range []string{"", "a.b", "a*", ">", "a b"} {
		if err := r.Pub.Publish(t.Context(), Delta(id, 1)); !errors.Is(err, keel.ErrInvalidInput) {
			t.Errorf("Publish(%q) = %v, want ErrInvalidInput", id, err)
		}
		if _, err := r.Sub.Subscribe(t.Context(), id, live.SubscribeOptions{}); !errors.Is(err, keel.ErrInvalidInput) {
			t.Errorf("Subscribe(%q) = %v, want ErrInvalidInput", id, err)
		}
	}
}

// RunCancelNoticeTests checks that cancel notices sent by from reach
// every listener of to (the same channel, or another connection to the
// same NATS), and stop reaching one once it stops listening. flush, if
// set, returns once to's server has taken its listeners' changes.
func RunCancelNoticeTests(t *testing.T, from, to live.CancelNotices, flush func() error) {
	flushed := func() {
		t.Helper()
		if flush != nil {
			if err := flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	got := make(chan live.CancelNotice, 4)
	stop, err := to.OnCancel(func(n live.CancelNotice) { got <- n })
	if err != nil {
		t.Fatal(err)
	}
	flushed()
	want := live.CancelNotice{WorkflowID: "s1/run-2", RunID: TestRunID}
	if err := from.NotifyCancel(want); err != nil {
		t.Fatal(err)
	}
	if n := Wait(t, got, "the cancel notice"); n != want {
		t.Fatalf("notice = %+v, want %+v", n, want)
	}

	stop()
	flushed()
	// A notice after stop, then one to a listener still there: the second
	// arrives and the first never does.
	if err := from.NotifyCancel(live.CancelNotice{WorkflowID: "late", RunID: TestRunID}); err != nil {
		t.Fatal(err)
	}
	again := make(chan live.CancelNotice, 4)
	stop2, err := to.OnCancel(func(n live.CancelNotice) { again <- n })
	if err != nil {
		t.Fatal(err)
	}
	defer stop2()
	flushed()
	if err := from.NotifyCancel(want); err != nil {
		t.Fatal(err)
	}
	Wait(t, again, "the second notice")
	select {
	case n := <-got:
		t.Fatalf("a stopped listener got %+v", n)
	default:
	}
}
