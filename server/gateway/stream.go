package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/client"
)

// SSE event names the gateway adds to keel's event types.
const (
	// EventLag reports deltas lost because the client read too slowly:
	// data {"missed": n, "last_seq": s}. Durable events are never lost;
	// the completed message that follows replaces the lost text.
	EventLag = "lag"
	// EventStreamError ends a stream that failed: data is an Error body.
	// Reconnect with Last-Event-ID to resume.
	EventStreamError = "stream_error"
)

// retryMillis is the reconnection delay the stream suggests to browsers.
const retryMillis = 1000

// SSEWriter writes Server-Sent Events to one response, each write bounded
// by a deadline and flushed at once.
type SSEWriter struct {
	w       io.Writer
	rc      *http.ResponseController
	timeout time.Duration
	// Wrote is when the last write happened.
	Wrote time.Time
}

// NewSSEWriter sends the event-stream headers and status 200; each later
// write must complete within timeout (0: no deadline).
func NewSSEWriter(w http.ResponseWriter, timeout time.Duration) *SSEWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	return &SSEWriter{w: w, rc: http.NewResponseController(w), timeout: timeout}
}

// ErrSSEField is returned, and nothing is written, when an event's id,
// name or data, or a comment, would not stay one field of one event: a
// browser splits lines at CR, LF and CRLF, so such bytes would let the
// value start fields or events of its own.
var ErrSSEField = errors.New("gateway: SSE field holds a byte it may not")

// maxSSEName bounds an event name, maxSSEID an event ID.
const (
	maxSSEName = 64
	maxSSEID   = maxMCPEventID
)

// Event writes one event: an id line when id is not empty, an event line
// when name is not empty, and one data line. The id must be at most
// 2048 letters, digits, '.', '_' and '-' (a durable sequence, or an MCP
// call's cursor), the name 1 to 64 bytes of
// letters, digits, '.', '_' and '-' (keel's event types are), and data
// must hold no CR, LF or NUL (compact JSON never does); otherwise Event
// writes nothing and returns ErrSSEField.
func (s *SSEWriter) Event(id, name string, data []byte) error {
	if !validSSEID(id) || !validSSEName(name) || bytes.ContainsAny(data, "\r\n\x00") {
		return ErrSSEField
	}
	var b strings.Builder
	b.Grow(len(id) + len(name) + len(data) + 24)
	if id != "" {
		b.WriteString("id: " + id + "\n")
	}
	if name != "" {
		b.WriteString("event: " + name + "\n")
	}
	b.WriteString("data: ")
	b.Write(data)
	b.WriteString("\n\n")
	return s.write(b.String())
}

// validSSEID reports whether id is empty or at most maxSSEID letters,
// digits, '.', '_' and '-': a durable sequence as strconv.FormatInt
// writes it, or an MCP call's cursor.
func validSSEID(id string) bool {
	return len(id) <= maxSSEID && validSSEToken(id)
}

// validSSEName reports whether name is empty or a token of letters,
// digits, '.', '_' and '-'.
func validSSEName(name string) bool {
	return len(name) <= maxSSEName && validSSEToken(name)
}

func validSSEToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Comment writes a comment line, which clients ignore: a keep-alive. Text
// holding CR, LF or NUL is refused with ErrSSEField.
func (s *SSEWriter) Comment(text string) error {
	if strings.ContainsAny(text, "\r\n\x00") {
		return ErrSSEField
	}
	return s.write(": " + text + "\n\n")
}

// Retry tells the client how long to wait before reconnecting.
func (s *SSEWriter) Retry(d time.Duration) error {
	return s.write("retry: " + strconv.FormatInt(d.Milliseconds(), 10) + "\n\n")
}

func (s *SSEWriter) write(text string) error {
	if s.timeout > 0 {
		// Not every ResponseWriter supports deadlines (httptest's
		// recorder does not); the stream works without one.
		_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	}
	if _, err := io.WriteString(s.w, text); err != nil {
		return err
	}
	s.Wrote = time.Now()
	return s.rc.Flush()
}

// lagData is the data of a lag event.
type lagData struct {
	Missed  int   `json:"missed"`
	LastSeq int64 `json:"last_seq"`
}

// streamEvents serves GET /events as Server-Sent Events: every durable
// event after the cursor (Last-Event-ID, else ?after=N, else 0) with its
// sequence as the SSE id, deltas between them without an id, a lag event
// where deltas were lost, and a comment when nothing else was written for
// KeepAlive. It follows the session, through the session's hub, until the
// client leaves or the gateway closes.
func (g *Gateway) streamEvents(w http.ResponseWriter, r *http.Request, s *client.Session) {
	after, err := cursor(r)
	if err != nil {
		WriteError(w, err)
		return
	}
	ctx, done, err := g.OpenStream(r)
	if err != nil {
		WriteError(w, err)
		return
	}
	defer done()
	{
		// A typed 404 for a session that does not exist, and a typed 409
		// for a cursor past the end of its log, rather than a stream that
		// fails at once or waits for events that are not this session's.
		cctx, ccancel := context.WithTimeout(ctx, g.opts.RequestTimeout)
		st, err := s.State(cctx)
		if err == nil {
			err = checkCursor(cctx, s, st, after)
		}
		ccancel()
		if err != nil {
			WriteError(w, err)
			return
		}
	}
	sub, err := g.join(s.ID(), after)
	if err != nil {
		WriteError(w, err)
		return
	}
	defer sub.leave()

	sw := NewSSEWriter(w, g.opts.WriteTimeout)
	if sw.Retry(retryMillis*time.Millisecond) != nil || sw.Comment(fmt.Sprintf("keel events of %s after %d", s.ID(), after)) != nil {
		return
	}
	keepAlive := time.NewTimer(g.opts.KeepAlive)
	defer keepAlive.Stop()
	last := after
	write := func(it streamItem) error {
		it.env = visibleEvent(r, it.env)
		return g.writeItem(sw, it, &last)
	}
	for {
		select {
		case <-sub.wake:
			items, behind, err := sub.take()
			for _, it := range items {
				if werr := write(it); werr != nil {
					return
				}
			}
			if behind {
				if rerr := sub.refill(ctx, write); rerr != nil {
					if ctx.Err() == nil {
						_ = write(streamItem{err: rerr})
					}
					return
				}
				sub.notify() // what was queued meanwhile, or the hub's end
				continue
			}
			if err != nil && len(items) == 0 {
				_ = write(streamItem{err: err})
				return
			}
			if err != nil {
				sub.notify() // write the error once the queue is empty
			}
		case <-keepAlive.C:
			if time.Since(sw.Wrote) >= g.opts.KeepAlive && sw.Comment("keep-alive") != nil {
				return
			}
		case <-ctx.Done():
			return
		}
		keepAlive.Reset(max(time.Until(sw.Wrote.Add(g.opts.KeepAlive)), time.Millisecond))
	}
}

// errStreamEnded ends a stream after an error event.
var errStreamEnded = errors.New("gateway: stream ended")

// writeItem writes one element of the stream, after a lag event for the
// deltas lost before it.
func (g *Gateway) writeItem(sw *SSEWriter, it streamItem, last *int64) error {
	if it.lost > 0 {
		data, _ := json.Marshal(lagData{Missed: it.lost, LastSeq: *last})
		if err := sw.Event("", EventLag, data); err != nil {
			return err
		}
	}
	if it.err != nil {
		if errors.Is(it.err, context.Canceled) {
			return it.err
		}
		e := fromError(it.err)
		if e.status >= 500 {
			g.log.Error("event stream failed", zap.String("error", it.err.Error()))
		}
		data, _ := json.Marshal(e)
		_ = sw.Event("", EventStreamError, data)
		return errStreamEnded
	}
	name, known := sseName(it.env.Type)
	if !known && !it.env.Durable() {
		// A delta of a type this keel does not know: deltas may be lost,
		// and this one has no name the stream can give it.
		return nil
	}
	data, err := json.Marshal(it.env)
	if err != nil {
		if !it.env.Durable() {
			return nil // a delta that is not JSON: dropped, as deltas may be
		}
		return err
	}
	if it.env.Durable() {
		*last = it.env.Seq
		return sw.Event(strconv.FormatInt(it.env.Seq, 10), name, data)
	}
	return sw.Event("", name, data)
}

// EventUnknown is the SSE event name of a durable event whose type is not
// in keel's registry of event types (one a newer worker wrote): it keeps
// its id and its envelope, which names the type, as data. Deltas of
// unknown types are not written.
const EventUnknown = "unknown"

// sseName is the SSE event name of an event type: the type as keel's
// registry of event types spells it (never the bytes a peer sent), or
// EventUnknown when the registry does not hold it.
func sseName(typ string) (name string, known bool) {
	if v, ok := sseNames.Load(typ); ok {
		return v.(string), true
	}
	ev, err := keel.Envelope{Type: typ}.Event()
	if err != nil {
		return EventUnknown, false
	}
	if _, unknown := ev.(keel.Unknown); unknown || ev.EventType() != typ || !validSSEName(typ) {
		return EventUnknown, false
	}
	sseNames.Store(typ, ev.EventType())
	return ev.EventType(), true
}

// sseNames caches the registry's answers for the types it holds (never
// for others: those are whatever peers send).
var sseNames sync.Map
