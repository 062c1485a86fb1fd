package gateway_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/gateway"
)

// A client whose gateway goes away mid-run reconnects to a new gateway
// (new process: new Temporal and NATS connections) with Last-Event-ID and
// gets every durable event after it, none skipped or repeated, including
// those recorded while no gateway was up.
func TestResumeAcrossGatewayRestart(t *testing.T) {
	ctx := testCtx(t)
	first := startGateway(t, gateway.Options{})
	m := model(t, `{"turns":[
	  {"tool_calls":[{"id":"g1","name":"gate","arguments":{"key":"restart-1"}}]},
	  {"text":["between"],"tool_calls":[{"id":"g2","name":"gate","arguments":{"key":"restart-2"}}]},
	  {"text":["the end"]}]}`)
	run := first.send(t, "restart", map[string]any{"prompt": "go", "model": m, "tools": []string{"gate"}})
	st := first.stream(t, ctx, "restart", "?after="+itoa(run.BaseSeq), nil)
	evs := st.until(t, keel.TypeToolStarted)
	seen := durableSeqs(t, evs)

	// The gateway stops: its streams end, its listener closes.
	first.stop()
	for {
		if _, err := st.next(); err != nil {
			break
		}
	}
	// The run goes on while no gateway is up.
	shared.gates.open("restart-1")
	waitForEvent(t, ctx, "restart", keel.TypeToolStarted, 2)

	second := startGateway(t, gateway.Options{})
	// Last-Event-ID wins over ?after: a browser reconnects with its
	// original URL.
	st2 := second.stream(t, ctx, "restart", "?after=0", map[string]string{"Last-Event-ID": itoa(seen[len(seen)-1])})
	evs2 := st2.until(t, keel.TypeToolStarted)
	shared.gates.open("restart-2")
	evs2 = append(evs2, st2.until(t, keel.TypeRunCompleted)...)
	seen = append(seen, durableSeqs(t, evs2)...)
	contiguous(t, seen, run.BaseSeq+1)

	var page gateway.EventsPage
	r := second.call(t, http.MethodGet, "/v1/sessions/restart/events?limit=500", nil).must(t, http.StatusOK)
	if err := json.Unmarshal(r.raw, &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != len(seen) {
		t.Fatalf("stream saw %d durable events, the log has %d", len(seen), len(page.Events))
	}
}

// waitForEvent waits until the session's log holds n events of type typ,
// following it through a client (no gateway involved).
func waitForEvent(t testing.TB, ctx context.Context, session, typ string, n int) {
	t.Helper()
	c := newClient(t, 0)
	for ev, err := range c.Session(session).EventsFrom(ctx, 0) {
		if err != nil {
			t.Fatalf("follow %s: %v", session, err)
		}
		if ev.Type == typ {
			if n--; n == 0 {
				return
			}
		}
	}
}

// A silent stream gets a keep-alive comment every KeepAlive.
func TestKeepAlive(t *testing.T) {
	s := startGateway(t, gateway.Options{KeepAlive: 50 * time.Millisecond})
	s.send(t, "keepalive", map[string]any{"prompt": "hi", "model": model(t, `{"turns":[{"text":["hi"]}]}`)})
	st := s.stream(t, testCtx(t), "keepalive", "", nil)
	st.until(t, keel.TypeRunCompleted)
	comments := 0
	start := time.Now()
	for comments < 3 {
		ev, err := st.next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.comment == "keep-alive" {
			comments++
		} else if ev.event != "" {
			t.Fatalf("unexpected event %+v", ev)
		}
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Fatalf("3 keep-alives in %v: more often than every 50 ms", d)
	}
	if s.gw.Streams() != 1 {
		t.Fatalf("Streams() = %d", s.gw.Streams())
	}
}

// smallBuffers makes a socket's kernel buffers small, so a reader that
// stops reading holds the gateway's writes within a few kilobytes.
func smallBuffers(c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		if serr == nil {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, 4096)
		}
	})
	if err != nil {
		return err
	}
	return serr
}

// smallListener accepts connections with small kernel buffers.
type smallListener struct{ net.Listener }

func (l smallListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		if rc, err := tc.SyscallConn(); err == nil {
			_ = smallBuffers(rc)
		}
	}
	return c, nil
}

// A client that stops reading never slows the run: its stream drops
// deltas beyond the buffer and says how many with a lag event; every
// durable event still arrives, and received + missed = published.
func TestSlowClientLags(t *testing.T) {
	const chunks, size = 200, 1024
	chunk, _ := json.Marshal(strings.Repeat("x", size))
	var text []string
	for range chunks {
		text = append(text, string(chunk))
	}
	m := model(t, `{"turns":[
	  {"tool_calls":[{"id":"g","name":"gate","arguments":{"key":"lag"}}]},
	  {"text":[`+strings.Join(text, ",")+`]}]}`)

	gw, err := gateway.New(newClient(t, 0), gateway.Options{StreamBuffer: 8})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(gw)
	srv.Listener = smallListener{srv.Listener}
	srv.Start()
	s := &stack{gw: gw, srv: srv}
	t.Cleanup(s.stop)
	hc := &http.Client{Transport: &http.Transport{
		DialContext:     (&net.Dialer{Control: func(_, _ string, c syscall.RawConn) error { return smallBuffers(c) }}).DialContext,
		ReadBufferSize:  512,
		WriteBufferSize: 512,
	}}

	ctx := testCtx(t)
	run := s.send(t, "lag", map[string]any{"prompt": "go", "model": m, "tools": []string{"gate"}})
	st := s.streamWith(t, ctx, hc, "lag", "?after="+itoa(run.BaseSeq), nil)
	evs := st.until(t, keel.TypeToolStarted)
	// Stop reading while the run streams all its deltas and ends.
	shared.gates.open("lag")
	waitForEvent(t, ctx, "lag", keel.TypeRunCompleted, 1)

	evs = append(evs, st.until(t, keel.TypeRunCompleted)...)
	received, missed := 0, 0
	for _, ev := range evs {
		switch ev.event {
		case keel.TypeTextDelta:
			received++
		case gateway.EventLag:
			var lag struct {
				Missed  int   `json:"missed"`
				LastSeq int64 `json:"last_seq"`
			}
			if err := json.Unmarshal([]byte(ev.data), &lag); err != nil || lag.Missed <= 0 || ev.id != "" {
				t.Fatalf("lag event %+v", ev)
			}
			missed += lag.Missed
		}
	}
	if missed == 0 {
		t.Fatalf("a stalled reader with an 8-event buffer received %d deltas and lagged none", received)
	}
	if received+missed != chunks {
		t.Fatalf("received %d + missed %d deltas, published %d", received, missed, chunks)
	}
	contiguous(t, durableSeqs(t, evs), run.BaseSeq+1)
}

// Past MaxStreams a new stream is refused with 503 overloaded; once one
// closes, a new one is served.
func TestMaxStreams(t *testing.T) {
	s := startGateway(t, gateway.Options{MaxStreams: 1})
	s.send(t, "max-streams", map[string]any{"prompt": "hi", "model": model(t, `{"turns":[{"text":["hi"]}]}`)})
	ctx, cancel := context.WithCancel(testCtx(t))
	first := s.stream(t, ctx, "max-streams", "", nil)
	first.until(t, keel.TypeRunCompleted)
	r := s.callWith(t, http.MethodGet, "/v1/sessions/max-streams/events", nil, map[string]string{"Accept": "text/event-stream"}).
		must(t, http.StatusServiceUnavailable)
	if r.code() != gateway.CodeOverloaded || r.body["retryable"] != true {
		t.Fatalf("second stream: %s", r.raw)
	}
	// A JSON page is not a stream.
	s.call(t, http.MethodGet, "/v1/sessions/max-streams/events", nil).must(t, http.StatusOK)
	cancel()
	first.close()
	// The server notices the closed connection and ends the handler.
	for wait := testCtx(t); s.gw.Streams() > 0 && wait.Err() == nil; {
		runtime.Gosched()
	}
	second := s.stream(t, testCtx(t), "max-streams", "", nil)
	second.until(t, keel.TypeRunCompleted)
}

// The streams of one session share one follower: a stream that joins
// late catches up from the follower's ring or, past it, from pages of the
// log, and then takes the same live events; every stream sees its
// durable events once each, from its own cursor to the run's end. The
// follower stops with the last stream.
func TestStreamsShareOneFollower(t *testing.T) {
	ctx := testCtx(t)
	s := startGateway(t, gateway.Options{})
	gateway.SetRingEvents(s.gw, 2)
	m := model(t, `{"turns":[
	  {"text":["a"],"tool_calls":[{"id":"g1","name":"gate","arguments":{"key":"share-1"}}]},
	  {"text":["one ","two ","three"]}]}`)
	run := s.send(t, "share", map[string]any{"prompt": "go", "model": m, "tools": []string{"gate"}})

	first := s.stream(t, ctx, "share", "?after="+itoa(run.BaseSeq), nil)
	evsFirst := first.until(t, keel.TypeToolStarted)
	started := durableSeqs(t, evsFirst)
	toolStarted := started[len(started)-1]
	// From the start of the log: older than the ring (2 events), so from
	// pages; and from just before tool.started: from the ring.
	fromPages := s.stream(t, ctx, "share", "", nil)
	evsPages := fromPages.until(t, keel.TypeToolStarted)
	fromRing := s.stream(t, ctx, "share", "", map[string]string{"Last-Event-ID": itoa(toolStarted - 1)})
	evsRing := fromRing.until(t, keel.TypeToolStarted)
	if n := gateway.Hubs(s.gw); n != 1 {
		t.Fatalf("%d followers for one session's 3 streams", n)
	}

	shared.gates.open("share-1")
	for _, c := range []struct {
		name string
		st   *sseStream
		evs  []sseEvent
		from int64
	}{
		{"first", first, evsFirst, run.BaseSeq + 1},
		{"from pages", fromPages, evsPages, 1},
		{"from the ring", fromRing, evsRing, toolStarted},
	} {
		evs := append(c.evs, c.st.until(t, keel.TypeRunCompleted)...)
		seqs := durableSeqs(t, evs)
		contiguous(t, seqs, c.from)
		var text strings.Builder
		for _, ev := range evs {
			if ev.event == keel.TypeTextDelta {
				var d keel.TextDelta
				if err := json.Unmarshal(ev.envelope(t).Data, &d); err != nil {
					t.Fatal(err)
				}
				text.WriteString(d.Text)
			}
		}
		if !strings.HasSuffix(text.String(), "one two three") {
			t.Errorf("%s: deltas %q", c.name, text.String())
		}
		c.st.close()
	}
	for wait := testCtx(t); s.gw.Streams() > 0 && wait.Err() == nil; {
		runtime.Gosched()
	}
	if n := gateway.Hubs(s.gw); n != 0 {
		t.Fatalf("%d followers left after the last stream closed", n)
	}
}

// A terminated session streams every event it recorded, then ends with a
// stream_error saying it is closed.
func TestStreamOfTerminatedSession(t *testing.T) {
	ctx := testCtx(t)
	s := startGateway(t, gateway.Options{})
	s.send(t, "terminated", map[string]any{"prompt": "hi", "model": model(t, `{"turns":[{"text":["hi"]}]}`)})
	waitForEvent(t, ctx, "terminated", keel.TypeRunCompleted, 1)
	if err := shared.tc.TerminateWorkflow(ctx, "terminated", "", "test"); err != nil {
		t.Fatal(err)
	}
	st := s.stream(t, ctx, "terminated", "", nil)
	evs := st.until(t, gateway.EventStreamError)
	contiguous(t, durableSeqs(t, evs), 1)
	last := evs[len(evs)-1]
	var e gateway.Error
	if err := json.Unmarshal([]byte(last.data), &e); err != nil || e.Code != "not_accepting" {
		t.Fatalf("end of stream: %+v (%v)", last, err)
	}
	if _, err := st.next(); err == nil {
		t.Fatal("the stream went on after its stream_error")
	}
}
