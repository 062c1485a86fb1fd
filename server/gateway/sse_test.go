package gateway_test

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/gateway"
)

// The attack: an envelope's type written after "event:" as it was, so a
// type holding "\nid: 1\ndata: ..." added fields and events to a
// browser's stream. The writer takes only a digit id, a token name and
// data without line ends: anything else is refused whole, and what it
// writes reads back, as a browser reads it, as exactly the one event
// asked for.
func TestSSEWriterHostileFields(t *testing.T) {
	rec := httptest.NewRecorder()
	sw := gateway.NewSSEWriter(rec, 0)
	hostile := []struct{ id, name, data string }{
		{"", "x\nid: 1\ndata: {\"forged\":1}", `{}`},
		{"", "x\rid: 1", `{}`},
		{"", "x\r\n\r\ndata: forged", `{}`},
		{"", "run.started extra", `{}`},
		{"", "na\x00me", `{}`},
		{"", strings.Repeat("a", 65), `{}`},
		{"1\nevent: forged", "run.started", `{}`},
		{"1\r", "run.started", `{}`},
		{"1/2", "run.started", `{}`},
		{"1 ", "run.started", `{}`},
		{strings.Repeat("1", 2049), "run.started", `{}`},
		{"1", "run.started", "{}\ndata: forged"},
		{"1", "run.started", "{}\revent: forged"},
		{"1", "run.started", "{}\x00"},
	}
	for _, h := range hostile {
		if err := sw.Event(h.id, h.name, []byte(h.data)); !errors.Is(err, gateway.ErrSSEField) {
			t.Errorf("Event(%q, %q, %q) = %v, want ErrSSEField", h.id, h.name, h.data, err)
		}
	}
	if err := sw.Comment("keep-alive\ndata: forged"); !errors.Is(err, gateway.ErrSSEField) {
		t.Errorf("a comment with a line end: %v", err)
	}
	if rec.Body.Len() != 0 {
		t.Fatalf("refused events wrote %q", rec.Body.String())
	}
	// What is valid goes out as one event each, with its own fields.
	for _, ok := range []struct{ id, name, data string }{
		{"7", "run.started", `{"seq":7}`}, {"", "text.delta", `{"text":"a\nb"}`}, {"", "", `{}`},
		{"9223372036854775807", "tool_call.delta", `[]`},
	} {
		if err := sw.Event(ok.id, ok.name, []byte(ok.data)); err != nil {
			t.Fatalf("Event(%q, %q, %q): %v", ok.id, ok.name, ok.data, err)
		}
	}
	evs := written(t, rec.Body.Bytes())
	if len(evs) != 4 || evs[0].id != "7" || evs[0].event != "run.started" || evs[0].fields != 3 ||
		evs[1].hasID || evs[1].data != `{"text":"a\nb"}` || evs[2].fields != 1 || evs[3].id != "9223372036854775807" {
		t.Fatalf("read back %+v", evs)
	}
}

// The stream names events from keel's registry of event types, never from
// the envelope's bytes: a durable event of an unknown type (a newer
// worker's, or one holding line ends) keeps its id under the name
// "unknown", with its type inside the JSON data; a delta of an unknown
// type is not written.
func TestStreamEventNames(t *testing.T) {
	at := time.Unix(1, 0).UTC()
	for _, c := range []struct {
		env  keel.Envelope
		want string // the event name; "" for nothing written
	}{
		{keel.Envelope{Seq: 5, Type: keel.TypeRunStarted, SessionID: "s", Data: json.RawMessage(`{}`), At: at}, keel.TypeRunStarted},
		{keel.Envelope{Type: keel.TypeTextDelta, SessionID: "s", Data: json.RawMessage(`{"text":"x\ny"}`), At: at}, keel.TypeTextDelta},
		{keel.Envelope{Seq: 6, Type: "x\nid: 1\ndata: {\"forged\":1}", SessionID: "s", Data: json.RawMessage(`{}`), At: at}, gateway.EventUnknown},
		{keel.Envelope{Seq: 7, Type: "newer.kind", SessionID: "s", Data: json.RawMessage(`{}`), At: at}, gateway.EventUnknown},
		{keel.Envelope{Type: "x\nid: 1\ndata: {\"forged\":1}", SessionID: "s", Data: json.RawMessage(`{}`), At: at}, ""},
		{keel.Envelope{Type: "Run.Started", SessionID: "s", Data: json.RawMessage(`{}`), At: at}, ""},
	} {
		rec := httptest.NewRecorder()
		sw := gateway.NewSSEWriter(rec, 0)
		if err := gateway.WriteEnvelope(sw, c.env); err != nil {
			t.Fatalf("%q: %v", c.env.Type, err)
		}
		evs := written(t, rec.Body.Bytes())
		if c.want == "" {
			if len(evs) != 0 {
				t.Fatalf("%q: wrote %+v", c.env.Type, evs)
			}
			continue
		}
		if len(evs) != 1 || evs[0].event != c.want || evs[0].hasID != c.env.Durable() {
			t.Fatalf("%q: wrote %+v", c.env.Type, evs)
		}
		var back keel.Envelope
		if err := json.Unmarshal([]byte(evs[0].data), &back); err != nil || back.Type != c.env.Type || back.Seq != c.env.Seq {
			t.Fatalf("%q: data %s", c.env.Type, evs[0].data)
		}
	}
}

// The client address of a request: the peer, or behind a trusted proxy
// the right-most hop that is not one; IPv6 counted by its /64.
func TestClientAddr(t *testing.T) {
	for _, c := range []struct {
		trusted []string
		remote  string
		xff     []string
		want    string
	}{
		{nil, "192.0.2.1:5000", nil, "192.0.2.1"},
		{nil, "192.0.2.1:5000", []string{"198.51.100.1"}, "192.0.2.1"},
		{[]string{"192.0.2.1"}, "192.0.2.1:5000", []string{"198.51.100.1"}, "198.51.100.1"},
		{[]string{"192.0.2.0/24"}, "192.0.2.1:5000", []string{"203.0.113.9, 198.51.100.1, 192.0.2.7"}, "198.51.100.1"},
		{[]string{"192.0.2.0/24"}, "192.0.2.1:5000", []string{"203.0.113.9", "198.51.100.1"}, "198.51.100.1"},
		{[]string{"192.0.2.0/24"}, "192.0.2.1:5000", []string{"garbage, 192.0.2.8"}, "192.0.2.8"},
		{[]string{"192.0.2.0/24"}, "192.0.2.1:5000", nil, "192.0.2.1"},
		{[]string{"192.0.2.0/24"}, "203.0.113.5:5000", []string{"198.51.100.1"}, "203.0.113.5"},
		{nil, "[2001:db8:1:2:3:4:5:6]:5000", nil, "2001:db8:1:2::/64"},
		{nil, "[::ffff:192.0.2.1]:5000", nil, "192.0.2.1"},
		{[]string{"::1"}, "[::1]:5000", []string{"[2001:db8::1]:443"}, "2001:db8::/64"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = c.remote
		for _, v := range c.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		got, err := gateway.ClientAddr(c.trusted, r)
		if err != nil || got != c.want {
			t.Errorf("%v %s %v: %q %v, want %q", c.trusted, c.remote, c.xff, got, err, c.want)
		}
	}
	if _, err := gateway.ClientAddr([]string{"10.0.0.0/33"}, httptest.NewRequest("GET", "/", nil)); err == nil {
		t.Error("a bad prefix was accepted")
	}
}
