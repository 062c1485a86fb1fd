package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/live"
)

// A hub follows one session for every event stream the gateway holds on
// it: one client.Session.EventsFrom (one Temporal history long poll and
// one live subscription) however many streams there are. It hands each
// stream the merged events through a bounded queue and keeps the latest
// durable events in a ring, from which a stream that joins late or fell
// behind catches up; what the ring no longer holds is read in pages
// (Session.EventsPage, queries only).
//
// Publishing never waits for a stream: a full queue drops a delta (the
// stream counts it and reports a lag event in its place) or, for a
// durable event, marks the stream behind; the stream then refills its
// durable events from the ring or pages, in order, none skipped or
// repeated.
//
// The hub starts where the session's own log ends when it starts (its
// state's last_seq, read by the hub), never at a stream's cursor: what
// one stream sends cannot change what another receives. A stream whose
// cursor is behind that point refills from pages; one ahead of it waits
// for the hub to pass it.
type hub struct {
	g       *Gateway
	session string
	cancel  context.CancelFunc
	// ready is closed once the hub knows where it starts (last), or
	// ended before it could.
	ready chan struct{}

	mu    sync.Mutex
	subs  map[*subscriber]struct{}
	ring  []keel.Envelope // the latest durable events, contiguous
	bytes int             // their size
	last  int64           // the last durable sequence the hub has seen
	ended bool
}

// Ring bounds: events (Gateway.ringEvents, a field so tests can shrink
// it), and bytes of event JSON.
const (
	defaultRingEvents = 1024
	ringBytes         = 4 << 20
)

// subscriber is one stream's place in a hub. Every field is guarded by
// the hub's mutex.
type subscriber struct {
	h *hub
	// cursor is the last durable sequence handed to the stream (queued,
	// or written during a refill).
	cursor  int64
	pending []streamItem
	limit   int
	// missed counts deltas lost since the last item queued.
	missed int
	// behind says a durable event did not fit: the stream refills from
	// its cursor before it takes queued items again.
	behind bool
	err    error // the hub ended with this error
	wake   chan struct{}
}

// streamItem is one element of a stream: an envelope, or an error; lost
// counts deltas lost just before it.
type streamItem struct {
	env  keel.Envelope
	err  error
	lost int
}

// join attaches a stream that resumes after cursor to the session's hub,
// starting one if none runs; a new hub past MaxSessions is refused with
// 503 overloaded. The stream refills first (behind is set), so whatever
// the hub has passed is read from the ring or from pages. The cursor is
// the stream's alone: the hub does not start from it.
func (g *Gateway) join(session string, cursor int64) (*subscriber, error) {
	g.hubsMu.Lock()
	defer g.hubsMu.Unlock()
	h := g.hubs[session]
	if h == nil {
		if err := g.followers.acquire(); err != nil {
			return nil, err
		}
		ctx, cancel := context.WithCancel(g.ctx)
		h = &hub{g: g, session: session, cancel: cancel, ready: make(chan struct{}), subs: map[*subscriber]struct{}{}}
		g.hubs[session] = h
		go h.follow(ctx)
	}
	s := &subscriber{h: h, cursor: cursor, behind: true, limit: g.opts.StreamBuffer, wake: make(chan struct{}, 1)}
	h.mu.Lock()
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	s.notify()
	return s, nil
}

// leave detaches the stream; the last one stops the hub.
func (s *subscriber) leave() {
	h := s.h
	h.g.hubsMu.Lock()
	defer h.g.hubsMu.Unlock()
	h.mu.Lock()
	delete(h.subs, s)
	empty := len(h.subs) == 0
	h.mu.Unlock()
	if empty {
		h.cancel()
		if h.g.hubs[h.session] == h {
			delete(h.g.hubs, h.session)
		}
	}
}

func (s *subscriber) notify() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// follow reads where the session's log ends, then runs the hub's one
// EventsFrom from there and fans its elements out. Its follower slot
// (MaxFollowedSessions) is given back when it returns.
func (h *hub) follow(ctx context.Context) {
	defer h.g.followers.release()
	end := h.start(ctx)
	if end == nil {
		for env, err := range h.g.c.Session(h.session).EventsFrom(ctx, h.last) {
			var lag *live.LaggedError
			switch {
			case err == nil:
				if end = h.publish(env); end == nil {
					continue
				}
			case errors.As(err, &lag):
				h.lost(lag.Missed)
				continue
			default:
				end = err
			}
			break
		}
	}
	if ctx.Err() != nil {
		h.setReady()
		return // no stream is left, or the gateway closed
	}
	if end == nil {
		// EventsFrom ends by itself only when the Session workflow
		// closed (terminated or failed): nothing more will come.
		end = keel.Errorf(keel.CodeNotAccepting, "session %s is closed; every event it recorded was sent", h.session)
	}
	h.g.hubsMu.Lock()
	if h.g.hubs[h.session] == h {
		delete(h.g.hubs, h.session)
	}
	h.g.hubsMu.Unlock()
	h.mu.Lock()
	h.ended = true
	for s := range h.subs {
		s.err = end
		s.notify()
	}
	h.mu.Unlock()
	h.setReady()
}

// start reads the session's state for where its own log ends, and makes
// that the hub's starting point.
func (h *hub) start(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, h.g.opts.RequestTimeout)
	st, err := h.g.c.Session(h.session).State(cctx)
	cancel()
	if err != nil {
		return err
	}
	h.mu.Lock()
	h.last = st.LastSeq
	h.mu.Unlock()
	h.setReady()
	return nil
}

// setReady closes ready once.
func (h *hub) setReady() {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.ready:
	default:
		close(h.ready)
	}
}

// publish hands one element to every stream, without waiting for any. A
// durable event must be the one after the last (the log is dense,
// docs/contract.md §14): one that is not (a forged live message carrying
// a seq) ends the hub with a retryable error rather than move its place,
// and the streams resume from their own cursors.
func (h *hub) publish(env keel.Envelope) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if env.Durable() {
		if env.Seq <= h.last {
			return nil
		}
		if env.Seq != h.last+1 {
			return &Error{Code: CodeUnavailable, Retryable: true, status: http.StatusServiceUnavailable,
				Message: fmt.Sprintf("the event feed of session %s went from seq %d to %d; reconnect to resume", h.session, h.last, env.Seq)}
		}
		h.ring = append(h.ring, env)
		h.bytes += env.Size()
		for len(h.ring) > 1 && (len(h.ring) > h.g.ringEvents || h.bytes > ringBytes) {
			h.bytes -= h.ring[0].Size()
			h.ring[0] = keel.Envelope{}
			h.ring = h.ring[1:]
		}
		h.last = env.Seq
	}
	for s := range h.subs {
		s.offer(env)
	}
	return nil
}

// lost reports deltas the hub's own subscription lost to every stream.
func (h *hub) lost(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		s.missed += n
	}
}

// offer queues env for the stream, or counts what it cannot take. The
// hub's mutex is held.
func (s *subscriber) offer(env keel.Envelope) {
	if env.Durable() {
		switch {
		case s.behind || env.Seq <= s.cursor:
			return // the refill brings it, or the stream is past it
		case env.Seq != s.cursor+1 || len(s.pending) >= s.limit:
			s.behind = true
			s.notify()
			return
		}
		s.cursor = env.Seq
	} else if s.behind || env.AfterSeq > s.cursor || len(s.pending) >= s.limit {
		// A delta is shown after the durable event it follows; a stream
		// that has not reached that event loses it, and says so.
		s.missed++
		return
	}
	s.pending = append(s.pending, streamItem{env: env, lost: s.missed})
	s.missed = 0
	s.notify()
}

// take returns what the stream has to write now: queued items, whether it
// must refill first (after writing them), and the hub's error.
func (s *subscriber) take() (items []streamItem, behind bool, err error) {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	items, s.pending = s.pending, nil
	return items, s.behind, s.err
}

// refill brings a stream that is behind up to the hub: from the ring if it
// reaches back to the stream's cursor, else a page at a time. write is
// called with each element, in order, outside the hub's lock.
func (s *subscriber) refill(ctx context.Context, write func(streamItem) error) error {
	h := s.h
	select {
	case <-h.ready:
	case <-ctx.Done():
		return ctx.Err()
	}
	for {
		h.mu.Lock()
		first := h.last + 1
		if len(h.ring) > 0 {
			first = h.ring[0].Seq
		}
		if s.cursor >= first-1 {
			// Caught up: the ring's events after the cursor, then
			// whatever the hub queues from now on (or its end: a hub
			// that ended has still been read up to where it got, so a
			// closed session's stream gets its whole log first).
			var items []streamItem
			lost := s.missed
			for _, env := range h.ring {
				if env.Seq > s.cursor {
					items = append(items, streamItem{env: env, lost: lost})
					lost = 0
					s.cursor = env.Seq
				}
			}
			s.missed = lost
			s.behind = false
			h.mu.Unlock()
			for _, it := range items {
				if err := write(it); err != nil {
					return err
				}
			}
			return nil
		}
		cursor := s.cursor
		h.mu.Unlock()
		page, _, err := h.g.c.Session(h.session).EventsPage(ctx, cursor, MaxEventsLimit)
		if err != nil {
			return err
		}
		for _, env := range page {
			h.mu.Lock()
			lost := s.missed
			s.missed = 0
			s.cursor = env.Seq
			h.mu.Unlock()
			if err := write(streamItem{env: env, lost: lost}); err != nil {
				return err
			}
		}
		if len(page) == 0 {
			// The log has nothing after the cursor yet: the hub is
			// behind the cursor and will pass it.
			h.mu.Lock()
			s.behind = false
			h.mu.Unlock()
			return nil
		}
	}
}
