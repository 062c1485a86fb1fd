package gateway_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/server/gateway"
)

// The fuzz targets' seeds are in testdata/fuzz/FuzzX; `go test` runs them
// as ordinary tests, and TestMain starts no server for `go test -fuzz`.

// A cursor is a formatted non-negative int64 and nothing else; anything
// else is a 400 that quotes at most a few bytes of it.
func FuzzCursor(f *testing.F) {
	f.Fuzz(func(t *testing.T, v string) {
		n, err := gateway.ParseCursor("after", v)
		want, perr := strconv.ParseInt(v, 10, 64)
		digits := v != "" && strings.Trim(v, "0123456789") == ""
		ok := perr == nil && digits && len(v) <= 19
		switch {
		case ok && (err != nil || n != want):
			t.Fatalf("ParseCursor(%q) = %d, %v; want %d", v, n, err, want)
		case !ok && err == nil:
			t.Fatalf("ParseCursor(%q) = %d, accepted", v, n)
		case err != nil && (gateway.StatusOf(err) != http.StatusBadRequest || len(err.Error()) > 200):
			t.Fatalf("ParseCursor(%q): %d %v", v, gateway.StatusOf(err), err)
		}
		// The same through a request: the header wins over the query.
		r := httptest.NewRequest(http.MethodGet, "/v1/sessions/x/events?after=3", nil)
		r.Header.Set("Last-Event-ID", v)
		c, cerr := gateway.CursorOf(r)
		switch {
		case v == "" && (cerr != nil || c != 3):
			t.Fatalf("an empty Last-Event-ID: %d, %v", c, cerr)
		case v != "" && ((cerr == nil) != (err == nil) || cerr == nil && c != n):
			t.Fatalf("CursorOf with Last-Event-ID %q = %d, %v; ParseCursor %d, %v", v, c, cerr, n, err)
		}
	})
}

// bodyStatus checks that what a route's body decoding and checks refused
// is the caller's error: 400 or 413, never a 5xx.
func bodyStatus(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if s := gateway.StatusOf(err); s != http.StatusBadRequest && s != http.StatusRequestEntityTooLarge {
		t.Fatalf("%s: status %d for %v", what, s, err)
	}
}

// The bodies of POST /runs, /steer and /respond decode strictly within
// their limit, and every refusal is a 400 or a 413.
func FuzzRequestBodies(f *testing.F) {
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Body = http.MaxBytesReader(nil, r.Body, 4096)
		switch route % 3 {
		case 0:
			var req gateway.RunRequest
			err := gateway.ReadJSON(r, &req)
			if err == nil {
				_, err = req.Validate()
				if err == nil && (strings.TrimSpace(req.Prompt) == "" || len(req.Prompt) > api.MaxPromptBytes) {
					t.Fatalf("prompt of %d bytes accepted", len(req.Prompt))
				}
			}
			bodyStatus(t, "run", err)
		case 1:
			var req gateway.SteerRequest
			err := gateway.ReadJSON(r, &req)
			if err == nil {
				err = req.Validate()
			}
			bodyStatus(t, "steer", err)
		case 2:
			var req gateway.RespondRequest
			err := gateway.ReadJSON(r, &req)
			if err == nil {
				if err = req.Validate(); err == nil && req.RequestID == "" {
					t.Fatal("respond without a request ID accepted")
				}
			}
			bodyStatus(t, "respond", err)
		}
	})
}

// A RunAgentInput decodes to a prompt of 1 to api.MaxPromptBytes bytes or
// a 400 or 413.
func FuzzAGUIInput(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest(http.MethodPost, "/v1/ag-ui", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Body = http.MaxBytesReader(nil, r.Body, 1<<16)
		prompt, err := gateway.AGUIPrompt(r)
		bodyStatus(t, "AG-UI input", err)
		if err == nil && len(prompt) > api.MaxPromptBytes {
			t.Fatalf("a prompt of %d bytes", len(prompt))
		}
	})
}

// written is what an SSEWriter call put on the wire, as a browser reads
// it.
func written(t *testing.T, out []byte) []browserEvent {
	t.Helper()
	rd := newBrowserReader(bytes.NewReader(out))
	var evs []browserEvent
	for {
		ev, err := rd.next()
		if errors.Is(err, io.EOF) {
			return evs
		}
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
}

// Whatever id, name and data an event is given, a browser reads at most
// one event from what the writer wrote, with exactly those fields: the
// writer refuses (ErrSSEField, nothing written) what would make more.
func FuzzSSEWriter(f *testing.F) {
	f.Fuzz(func(t *testing.T, id, name string, data []byte) {
		rec := httptest.NewRecorder()
		sw := gateway.NewSSEWriter(rec, 0)
		err := sw.Event(id, name, data)
		out := rec.Body.Bytes()
		evs := written(t, out)
		if err != nil {
			if !errors.Is(err, gateway.ErrSSEField) || len(out) != 0 {
				t.Fatalf("refused with %v after writing %q", err, out)
			}
			return
		}
		if len(evs) != 1 {
			t.Fatalf("Event(%q, %q, %q) wrote %d events: %q", id, name, data, len(evs), out)
		}
		ev := evs[0]
		wantFields := 1
		if id != "" {
			wantFields++
		}
		if name != "" {
			wantFields++
		}
		if ev.fields != wantFields || ev.id != id || ev.hasID != (id != "") || ev.event != name || ev.data != string(data) {
			t.Fatalf("Event(%q, %q, %q) reads back as %+v", id, name, data, ev)
		}
		if bytes.ContainsAny(out[:len(out)-2], "\r\x00") || bytes.Count(out, []byte("\n")) != wantFields+1 {
			t.Fatalf("output %q", out)
		}
		// Comments likewise.
		rec = httptest.NewRecorder()
		sw = gateway.NewSSEWriter(rec, 0)
		if err := sw.Comment(name + id); err == nil && len(written(t, rec.Body.Bytes())) != 0 {
			t.Fatalf("a comment made an event: %q", rec.Body.Bytes())
		}
	})
}

// A stream's envelope, whatever its type, seq and data (a forged live
// message), is written as at most one event whose name comes from keel's
// registry of event types (or is "unknown") and whose id is its seq.
func FuzzStreamEnvelope(f *testing.F) {
	f.Fuzz(func(t *testing.T, typ string, seq int64, data []byte) {
		env := keel.Envelope{Type: typ, Seq: max(seq, 0), SessionID: "s", RunID: "s/run-1", At: time.Unix(0, 0).UTC()}
		if json.Valid(data) {
			env.Data = data
		}
		rec := httptest.NewRecorder()
		sw := gateway.NewSSEWriter(rec, 0)
		if err := gateway.WriteEnvelope(sw, env); err != nil {
			t.Fatalf("WriteEnvelope: %v", err)
		}
		evs := written(t, rec.Body.Bytes())
		if len(evs) > 1 {
			t.Fatalf("%d events for one envelope: %q", len(evs), rec.Body.Bytes())
		}
		if len(evs) == 0 {
			if env.Durable() {
				t.Fatalf("durable event %d not written", env.Seq)
			}
			return
		}
		ev := evs[0]
		known := keel.Envelope{Type: typ}
		kev, _ := known.Event()
		_, unknown := kev.(keel.Unknown)
		switch {
		case unknown && ev.event != gateway.EventUnknown, !unknown && ev.event != typ:
			t.Fatalf("type %q written as event %q", typ, ev.event)
		case env.Durable() && ev.id != strconv.FormatInt(env.Seq, 10), !env.Durable() && ev.hasID:
			t.Fatalf("seq %d written with id %q", env.Seq, ev.id)
		}
		var back keel.Envelope
		if err := json.Unmarshal([]byte(ev.data), &back); err != nil || back.Seq != env.Seq {
			t.Fatalf("data %q: %v", ev.data, err)
		}
	})
}

// A key line never makes an error that quotes the key, a value or a word
// of it: the key here always holds '~', which no message has.
func FuzzParseAPIKey(f *testing.F) {
	f.Fuzz(func(t *testing.T, text string) {
		k, err := gateway.ParseAPIKey("secret~" + text)
		if err != nil {
			if strings.Contains(err.Error(), "~") {
				t.Fatalf("the error quotes the line: %v", err)
			}
			return
		}
		if !strings.HasPrefix(k.Key, "secret~") || strings.ContainsAny(k.Key, " \t\n\r") {
			t.Fatalf("key %q from %q", k.Key, text)
		}
		switch k.Scope {
		case "", gateway.ScopeRead, gateway.ScopeFull:
		default:
			t.Fatalf("scope %q", k.Scope)
		}
		if k.Prefix != "" && keel.ValidateSessionID(k.Prefix) != nil {
			t.Fatalf("prefix %q", k.Prefix)
		}
	})
}
