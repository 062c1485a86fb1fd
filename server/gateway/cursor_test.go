package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/server/gateway"
	"github.com/keelrun/keel/server/internal/keeltest"
)

// logThrough follows a session's durable log after seq through a client
// of its own (no gateway) up to the first event of type typ, waiting for
// it to be committed, and returns the events read.
func logThrough(t testing.TB, session string, after int64, typ string) []keel.Envelope {
	t.Helper()
	var out []keel.Envelope
	for ev, err := range newClient(t, 0).Session(session).EventsFrom(testCtx(t), after) {
		if err != nil {
			t.Fatalf("follow %s: %v", session, err)
		}
		if !ev.Durable() {
			continue
		}
		out = append(out, ev)
		if ev.Type == typ {
			break
		}
	}
	return out
}

// seqsOf lists the ids of the events that have one.
func seqsOf(t testing.TB, evs []browserEvent) []int64 {
	t.Helper()
	var out []int64
	for _, ev := range evs {
		if !ev.hasID {
			continue
		}
		n, err := parseSeq(ev.id)
		if err != nil {
			t.Fatalf("id %q", ev.id)
		}
		out = append(out, n)
	}
	return out
}

// envSeqs lists the envelopes' sequences.
func envSeqs(evs []keel.Envelope) []int64 {
	var out []int64
	for _, e := range evs {
		out = append(out, e.Seq)
	}
	return out
}

// twoRuns scripts a session's two runs (the scripted model plays the
// turn after the transcript's last answer): a short first run, then a
// second that waits at gate key and streams ten chunks.
func twoRuns(key string) string {
	return `{"chunk_delay":"1ms","turns":[
	  {"text":["one"]},
	  {"tool_calls":[{"id":"g1","name":"gate","arguments":{"key":"` + key + `"}}]},
	  {"text":["one ","two ","three ","four ","five ","six ","seven ","eight ","nine ","ten"]}]}`
}

// shortCtx bounds a wait that fails the test when the attack works: the
// honest stream would wait forever.
func shortCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// The attack: a stream that opened first with Last-Event-ID
// 9000000000000000000 made the session's shared follower start there, and
// a second, honest stream then received none of the next run's events.
// Now the hostile stream gets a typed 409, and the honest stream receives
// every event of the run, the same as the session's log.
func TestHostileCursorCannotBlindOthers(t *testing.T) {
	s := startGateway(t, gateway.Options{})
	m := model(t, twoRuns("blind-2"))
	s.send(t, "blind", map[string]any{"prompt": "first", "model": m})

	for _, hostile := range []map[string]string{
		{"Last-Event-ID": "9000000000000000000"},
		{"Last-Event-ID": "9223372036854775807"},
	} {
		r := s.callWith(t, http.MethodGet, "/v1/sessions/blind/events", nil,
			map[string]string{"Accept": "text/event-stream", "Last-Event-ID": hostile["Last-Event-ID"]}).must(t, http.StatusConflict)
		if r.code() != gateway.CodeCursorAhead || r.header.Get("Content-Type") != "application/json" {
			t.Fatalf("hostile cursor %s: %s", hostile["Last-Event-ID"], r.raw)
		}
	}
	r := s.callWith(t, http.MethodGet, "/v1/sessions/blind/events?after=9000000000000000000", nil,
		map[string]string{"Accept": "text/event-stream"}).must(t, http.StatusConflict)
	if r.code() != gateway.CodeCursorAhead {
		t.Fatalf("hostile ?after: %s", r.raw)
	}

	// The honest stream, attached before the next run, a dozen events.
	first := logThrough(t, "blind", 0, keel.TypeRunCompleted)
	end := first[len(first)-1].Seq
	ctx := shortCtx(t)
	rd, _ := s.browserStream(t, ctx, "blind", map[string]string{"Last-Event-ID": itoa(end)})
	run := s.send(t, "blind", map[string]any{"prompt": "second", "model": m, "tools": []string{"gate"}})
	shared.gates.open("blind-2")
	evs := s.followToEnd(t, ctx, "blind", rd, end, keel.TypeRunCompleted)
	want := envSeqs(logThrough(t, "blind", run.BaseSeq, keel.TypeRunCompleted))
	if seqs := seqsOf(t, evs); !slices.Equal(seqs, want) || len(want) < 8 {
		t.Fatalf("the honest stream got %v, the log has %v", seqs, want)
	}
	if n := gateway.Hubs(s.gw); n > 1 {
		t.Fatalf("%d hubs for one session", n)
	}
}

// Even with a cursor past the end of the log attached to the hub first
// (which no request can do any more), the hub starts where the log ends,
// not at that cursor: an honest stream that joins after it receives every
// event of the next run.
func TestHubIgnoresSubscriberCursor(t *testing.T) {
	s := startGateway(t, gateway.Options{})
	m := model(t, twoRuns("hub-cursor-2"))
	s.send(t, "hub-cursor", map[string]any{"prompt": "first", "model": m})
	leave, err := gateway.Attach(s.gw, "hub-cursor", 9000000000000000000)
	if err != nil {
		t.Fatal(err)
	}
	defer leave()
	first := logThrough(t, "hub-cursor", 0, keel.TypeRunCompleted)
	end := first[len(first)-1].Seq
	ctx := shortCtx(t)
	rd, _ := s.browserStream(t, ctx, "hub-cursor", map[string]string{"Last-Event-ID": itoa(end)})
	run := s.send(t, "hub-cursor", map[string]any{"prompt": "second", "model": m, "tools": []string{"gate"}})
	shared.gates.open("hub-cursor-2")
	evs := s.followToEnd(t, ctx, "hub-cursor", rd, end, keel.TypeRunCompleted)
	want := envSeqs(logThrough(t, "hub-cursor", run.BaseSeq, keel.TypeRunCompleted))
	if seqs := seqsOf(t, evs); !slices.Equal(seqs, want) {
		t.Fatalf("the honest stream got %v, the log has %v", seqs, want)
	}
	if n := gateway.Hubs(s.gw); n != 1 {
		t.Fatalf("%d hubs", n)
	}
}

// A stale cursor, such as a browser keeps for a session that was
// recreated under the same ID, or one of another session: past the end of
// this session's log, it gets 409 cursor_ahead (the page then starts
// again from 0), and the other streams of the session are not affected.
func TestStaleCursor(t *testing.T) {
	s := startGateway(t, gateway.Options{})
	long := model(t, `{"turns":[{"text":["a"],"tool_calls":[{"id":"g","name":"gate","arguments":{"key":"stale-long"}}]},{"text":["b"]}]}`)
	s.send(t, "stale-long", map[string]any{"prompt": "go", "model": long, "tools": []string{"gate"}})
	shared.gates.open("stale-long")
	longLog := logThrough(t, "stale-long", 0, keel.TypeRunCompleted)
	stale := longLog[len(longLog)-1].Seq

	short := shared.book.Add(t, t.Name()+"-short", `{"turns":[{"text":["hi"]},{"text":["again"]}]}`)
	s.send(t, "stale-short", map[string]any{"prompt": "hi", "model": short})
	shortLog := logThrough(t, "stale-short", 0, keel.TypeRunCompleted)
	if end := shortLog[len(shortLog)-1].Seq; end >= stale {
		t.Fatalf("the short session's log (%d) is not shorter than the long one's (%d)", end, stale)
	}
	// An honest stream follows the short session from its start.
	ctx := shortCtx(t)
	honest := s.stream(t, ctx, "stale-short", "?after=0", nil)
	evs := honest.until(t, keel.TypeRunCompleted)

	r := s.callWith(t, http.MethodGet, "/v1/sessions/stale-short/events?after=0", nil,
		map[string]string{"Accept": "text/event-stream", "Last-Event-ID": itoa(stale)}).must(t, http.StatusConflict)
	if r.code() != gateway.CodeCursorAhead || !strings.Contains(r.body["message"].(string), "after=0") {
		t.Fatalf("stale cursor: %s", r.raw)
	}
	// The last event of the log is a valid cursor: the stream waits for
	// what comes after it.
	atEnd := s.stream(t, ctx, "stale-short", "", map[string]string{"Last-Event-ID": itoa(shortLog[len(shortLog)-1].Seq)})

	run := s.send(t, "stale-short", map[string]any{"prompt": "again", "model": short})
	evs = append(evs, honest.until(t, keel.TypeRunCompleted)...)
	contiguous(t, durableSeqs(t, evs), 1)
	tail := durableSeqs(t, atEnd.until(t, keel.TypeRunCompleted))
	contiguous(t, tail, run.BaseSeq+1)
}

// A Last-Event-ID or after that is not a sequence as the gateway writes
// one (negative, signed, spaced, hexadecimal, past int64, repeated) gets a
// typed 400 and opens nothing.
func TestMalformedCursor(t *testing.T) {
	s := startGateway(t, gateway.Options{})
	s.send(t, "cursor-bad", map[string]any{"prompt": "hi", "model": model(t, `{"turns":[{"text":["hi"]}]}`)})
	for _, v := range []string{"-1", "+1", "1.5", "0x10", "1e3", "abc", "99999999999999999999", "9223372036854775808",
		"１", strings.Repeat("9", 4096)} {
		for _, where := range []string{"header", "query"} {
			headers := map[string]string{"Accept": "text/event-stream"}
			path := "/v1/sessions/cursor-bad/events"
			if where == "header" {
				headers["Last-Event-ID"] = v
			} else {
				path += "?after=" + urlQuery(v)
			}
			r := s.callWith(t, http.MethodGet, path, nil, headers)
			if r.status != http.StatusBadRequest || r.code() != "invalid_input" || strings.Contains(r.body["message"].(string), strings.Repeat("9", 100)) {
				t.Errorf("%s %q: %d %.200s", where, v, r.status, r.raw)
			}
		}
		// The JSON page reads after alike.
		if r := s.call(t, http.MethodGet, "/v1/sessions/cursor-bad/events?after="+urlQuery(v), nil); r.status != http.StatusBadRequest {
			t.Errorf("page after=%q: %d %.200s", v, r.status, r.raw)
		}
	}
	r := s.callWith(t, http.MethodGet, "/v1/sessions/cursor-bad/events?after=1&after=2", nil,
		map[string]string{"Accept": "text/event-stream"}).must(t, http.StatusBadRequest)
	if r.code() != "invalid_input" {
		t.Fatalf("repeated after: %s", r.raw)
	}
	if s.gw.Streams() != 0 {
		t.Fatalf("%d streams open after refused requests", s.gw.Streams())
	}
}

// urlQuery escapes a query value.
func urlQuery(v string) string { return strings.NewReplacer("+", "%2B", " ", "%20").Replace(v) }

// Envelopes forged on the live channel cannot inject SSE fields nor move
// the session's follower: a type holding "\nid: 1\ndata: ..." is not
// written (it is no type keel knows), and a "delta" carrying a huge seq
// does not make the follower skip the log. A browser reading the stream
// sees exactly the session's durable events, each once, with their own
// ids, and no forged data.
func TestForgedLiveEnvelopes(t *testing.T) {
	s := startGateway(t, gateway.Options{})
	m := model(t, `{"chunk_delay":"1ms","turns":[
	  {"tool_calls":[{"id":"g1","name":"gate","arguments":{"key":"forged-1"}}]},
	  {"text":["after ","the ","forgery"]}]}`)
	run := s.send(t, "forged", map[string]any{"prompt": "go", "model": m, "tools": []string{"gate"}})
	ctx := shortCtx(t)
	rd, _ := s.browserStream(t, ctx, "forged", map[string]string{"Last-Event-ID": itoa(run.BaseSeq)})
	var evs []browserEvent
	for {
		ev, err := rd.next()
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
		if ev.event == keel.TypeToolStarted {
			break
		}
	}

	pub := keeltest.DialNATS(t, shared.nats.ClientURL(), live.NATSOptions{})
	forge := func(env keel.Envelope) {
		t.Helper()
		env.SessionID, env.RunID, env.At = "forged", run.RunID, time.Now()
		if env.Data == nil {
			env.Data = json.RawMessage(`{"forged":2}`)
		}
		// Raw bytes on the session's subject: keel's own publisher
		// refuses to send these, an attacker's client does not.
		b, err := json.Marshal(env)
		if err != nil {
			t.Fatal(err)
		}
		if err := pub.Conn().Publish(live.Subject(live.DefaultPrefix, "forged"), b); err != nil {
			t.Fatal(err)
		}
	}
	forge(keel.Envelope{Type: "x\nid: 1\ndata: {\"forged\":1}"})
	forge(keel.Envelope{Type: "x\rid: 1\revent: run.completed\r\rdata: {\"forged\":1}"})
	forge(keel.Envelope{Type: keel.TypeTextDelta, Data: json.RawMessage(`{"step":1,"attempt":1,"text":"forged\nid: 7"}`)})
	forge(keel.Envelope{Type: keel.TypeTextDelta, Seq: 9000000000000000000})
	shared.gates.open("forged-1")

	// Read the rest as a browser would, reconnecting when the stream ends
	// (the follower ends rather than take a forged seq).
	evs = append(evs, s.followToEnd(t, ctx, "forged", rd, seqsOf(t, evs)[len(seqsOf(t, evs))-1], keel.TypeRunCompleted)...)
	want := envSeqs(logThrough(t, "forged", run.BaseSeq, keel.TypeRunCompleted))
	if got := seqsOf(t, evs); !slices.Equal(got, want) {
		t.Fatalf("durable ids %v, the log has %v", got, want)
	}
	for _, ev := range evs {
		if strings.Contains(ev.data, `"forged":1`) || strings.Contains(ev.data, `{"forged":2}`) || ev.event == "x" {
			t.Fatalf("a forged envelope reached the browser: %+v", ev)
		}
		if ev.hasID {
			var env keel.Envelope
			if err := json.Unmarshal([]byte(ev.data), &env); err != nil || itoa(env.Seq) != ev.id || env.Type != ev.event {
				t.Fatalf("event id %s / name %s / data %s disagree", ev.id, ev.event, ev.data)
			}
		}
		if ev.fields > 3 {
			t.Fatalf("an event of %d fields: %+v", ev.fields, ev)
		}
	}
}
