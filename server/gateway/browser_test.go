package gateway_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// browserEvent is one event as a browser's EventSource dispatches it
// (the WHATWG event-stream algorithm): the fields its lines set, and its
// data lines joined with "\n".
type browserEvent struct {
	// id is the id field set in this event, hasID whether one was.
	id    string
	hasID bool
	event string
	data  string
	// fields counts the field lines of the event (comments excluded).
	fields int
}

// browserReader reads an event stream the way a browser does: a line
// ends at CRLF, LF or a lone CR; an empty line dispatches the event; an
// event without data is not dispatched.
type browserReader struct {
	rd  *bufio.Reader
	cur browserEvent
	buf []string
}

func newBrowserReader(r io.Reader) *browserReader { return &browserReader{rd: bufio.NewReader(r)} }

// line reads one line without its end.
func (b *browserReader) line() (string, error) {
	var sb strings.Builder
	for {
		c, err := b.rd.ReadByte()
		if err != nil {
			return sb.String(), err
		}
		switch c {
		case '\n':
			return sb.String(), nil
		case '\r':
			if next, err := b.rd.Peek(1); err == nil && next[0] == '\n' {
				_, _ = b.rd.ReadByte()
			}
			return sb.String(), nil
		}
		sb.WriteByte(c)
	}
}

// next returns the next dispatched event; io.EOF at the end.
func (b *browserReader) next() (browserEvent, error) {
	for {
		l, err := b.line()
		if err != nil {
			return browserEvent{}, err
		}
		if l == "" {
			ev, data := b.cur, b.buf
			b.cur, b.buf = browserEvent{}, nil
			if data == nil {
				continue // no data line: a browser dispatches nothing
			}
			ev.data = strings.Join(data, "\n")
			return ev, nil
		}
		if l[0] == ':' {
			continue
		}
		field, value, found := strings.Cut(l, ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		b.cur.fields++
		switch field {
		case "id":
			if !strings.Contains(value, "\x00") {
				b.cur.id, b.cur.hasID = value, true
			}
		case "event":
			b.cur.event = value
		case "data":
			b.buf = append(b.buf, value)
		}
	}
}

func parseSeq(id string) (int64, error) { return strconv.ParseInt(id, 10, 64) }

// browserStream opens the session's event stream and reads it as a
// browser would.
func (s *stack) browserStream(t testing.TB, ctx context.Context, session string, headers map[string]string) (*browserReader, func()) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.srv.URL+"/v1/sessions/"+session+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	if s.key != "" {
		req.Header.Set("Authorization", bearer(s.key))
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("open stream: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("open stream: %d: %s", resp.StatusCode, b)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return newBrowserReader(resp.Body), func() { resp.Body.Close() }
}

// followToEnd reads a session's stream from rd (nil: it opens one after
// after) until an event of type until, as a browser does: on a
// stream_error or a closed stream it reconnects with Last-Event-ID set to
// the last id it saw. It returns every event received.
func (s *stack) followToEnd(t testing.TB, ctx context.Context, session string, rd *browserReader, after int64, until string) []browserEvent {
	t.Helper()
	var out []browserEvent
	last := after
	for reconnects := 0; ; reconnects++ {
		if reconnects > 20 {
			t.Fatalf("reconnected %d times without reaching %s", reconnects, until)
		}
		closeStream := func() {}
		if rd == nil {
			rd, closeStream = s.browserStream(t, ctx, session, map[string]string{"Last-Event-ID": itoa(last)})
		}
		for {
			ev, err := rd.next()
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				break
			}
			if err != nil {
				t.Fatalf("stream of %s: %v", session, err)
			}
			out = append(out, ev)
			if ev.hasID {
				n, perr := parseSeq(ev.id)
				if perr != nil {
					t.Fatalf("event id %q is not a sequence", ev.id)
				}
				last = n
			}
			if ev.event == until {
				closeStream()
				return out
			}
			if ev.event == "stream_error" {
				break
			}
		}
		closeStream()
		rd = nil
	}
}
