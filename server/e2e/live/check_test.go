package live_test

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/internal/livetest"
	"github.com/keelrun/keel/live"
)

// The attack over NATS: anyone who may publish on the session's subject
// sends each forgery, most with a plausible counter header. The subscriber
// delivers none of them, reports no lag for them, and keeps the real
// publisher's counters: its next events arrive, with no gap and none
// taken for a repeat.
func TestNATSDropsForgedEnvelopes(t *testing.T) {
	srv := startNATSServer(t)
	var reasons sync.Map
	var rejected atomic.Int64
	ch := dialNATS(t, srv.ClientURL(), live.NATSOptions{OnReject: func(r live.Reason) {
		n, _ := reasons.LoadOrStore(r, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
		rejected.Add(1)
	}})
	sub := livetest.Subscribe(t, ch, "s1", 0)
	raw := connect(t, srv.ClientURL())
	wire, err := raw.SubscribeSync(live.Subject(live.DefaultPrefix, "s1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Flush(); err != nil {
		t.Fatal(err)
	}
	pub := dialNATS(t, srv.ClientURL(), live.NATSOptions{})
	livetest.Publish(t, pub, "s1", 1, 2)
	livetest.Expect(t, sub, livetest.Events(1, 2))
	// The real publisher's stream, as the wire shows it.
	first, err := wire.NextMsg(livetest.Guard)
	if err != nil {
		t.Fatal(err)
	}
	stream, _, _ := strings.Cut(first.Header.Get(headerLive), " ")

	fs := livetest.Forgeries(t)
	for i, f := range fs {
		m := nats.NewMsg(live.Subject(live.DefaultPrefix, "s1"))
		// Alternately a counter far ahead of the real stream's (which
		// would make its next events look like repeats) and one of a
		// stream of its own (which would start counting it).
		if i%2 == 0 {
			m.Header.Set(headerLive, stream+" 1000000")
		} else {
			m.Header.Set(headerLive, "forger 1")
		}
		m.Data = []byte(f.Raw)
		if err := raw.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := raw.Flush(); err != nil {
		t.Fatal(err)
	}
	livetest.Publish(t, pub, "s1", 3, 4)
	livetest.Expect(t, sub, livetest.Events(3, 4))
	livetest.ExpectNothing(t, sub)
	if got := ch.Rejected(); got != int64(len(fs)) {
		t.Errorf("Rejected() = %d, want %d", got, len(fs))
	}
	if got := rejected.Load(); got != int64(len(fs)) {
		t.Errorf("OnReject called %d times, want %d", got, len(fs))
	}
	want := map[live.Reason]int64{}
	for _, f := range fs {
		want[f.Reason]++
	}
	for r, n := range want {
		v, _ := reasons.Load(r)
		if v == nil || v.(*atomic.Int64).Load() != n {
			t.Errorf("reason %s counted %v times, want %d", r, v, n)
		}
	}
}

// A forged counter from a known stream far ahead cannot overflow the lag
// count into a negative number (or a huge positive one): one jump reports
// at most math.MaxInt32 lost events.
func TestNATSForgedCounterJumpIsBounded(t *testing.T) {
	srv := startNATSServer(t)
	ch := dialNATS(t, srv.ClientURL(), live.NATSOptions{})
	sub := livetest.Subscribe(t, ch, "s1", 0)
	raw := connect(t, srv.ClientURL())
	for i, counter := range []string{"A 1", "A 18446744073709551615"} {
		m := nats.NewMsg(live.Subject(live.DefaultPrefix, "s1"))
		m.Header.Set(headerLive, counter)
		b, _ := json.Marshal(livetest.Delta("s1", i+1))
		m.Data = b
		if err := raw.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	livetest.Expect(t, sub, []livetest.Step{{Event: 1}, livetest.Lag(math.MaxInt32), {Event: 2}})
}

// Cancel notices that are not well formed never reach a listener, whether
// NotifyCancel was asked to send them or a raw connection sent them.
func TestNATSCancelNoticesRefuseForgeries(t *testing.T) {
	srv := startNATSServer(t)
	ch := dialNATS(t, srv.ClientURL(), live.NATSOptions{})
	got := make(chan live.CancelNotice, 16)
	stop, err := ch.OnCancel(func(n live.CancelNotice) { got <- n })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if err := ch.Conn().Flush(); err != nil {
		t.Fatal(err)
	}
	bad := livetest.BadCancelNotices()
	for _, n := range bad {
		if err := ch.NotifyCancel(n); !errors.Is(err, keel.ErrInvalidInput) {
			t.Errorf("NotifyCancel(%+v) = %v, want ErrInvalidInput", n, err)
		}
	}
	raw := connect(t, srv.ClientURL())
	var forged [][]byte
	for _, n := range bad {
		b, _ := json.Marshal(n)
		forged = append(forged, b)
	}
	forged = append(forged,
		[]byte("not json"),
		[]byte(`{"workflow_id":"s1/run-2","run_id":"`+livetest.TestRunID+`","pad":"`+strings.Repeat("x", live.MaxCancelNoticeBytes)+`"}`),
		[]byte(`"s1/run-2"`),
	)
	for _, b := range forged {
		if err := raw.Publish(live.CancelSubject(live.DefaultPrefix), b); err != nil {
			t.Fatal(err)
		}
	}
	if err := raw.Flush(); err != nil {
		t.Fatal(err)
	}
	good := livetest.GoodCancelNotices()
	for _, n := range good {
		if err := ch.NotifyCancel(n); err != nil {
			t.Errorf("NotifyCancel(%+v) = %v", n, err)
		}
	}
	for _, want := range good {
		if n := livetest.Wait(t, got, "a notice"); n != want {
			t.Errorf("listener got %+v, want %+v", n, want)
		}
	}
	if got := ch.Rejected(); got != int64(len(forged)) {
		t.Errorf("Rejected() = %d, want %d", got, len(forged))
	}
}
