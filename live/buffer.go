package live

import (
	"context"
	"sync"

	"github.com/keelrun/keel"
)

// buffer is one subscriber's bounded queue of events. Pushing never blocks:
// when the queue is full the oldest event is dropped and counted, so the
// subscriber keeps the freshest events and learns exactly how many it lost.
//
// Every lost event is older than every retained one, so a single counter
// (lost) placed in front of the head marks the gap's position exactly: what
// Next returned before the *LaggedError precedes the gap, what it returns
// after follows it. Gaps found upstream (a NATS publisher's counter jumping)
// travel with the event after them in item.gapBefore for the same reason.
type buffer struct {
	mu      sync.Mutex
	items   []item // ring; grows up to limit so idle subscribers stay small
	head, n int
	limit   int
	lost    int // events dropped in front of the head, not yet reported
	carry   int // events known lost after the newest item, not yet attached
	// interrupted: the connection to the server was lost, so events may
	// have been lost, how many unknown; reported as a *LaggedError of
	// Missed 0 unless an exact gap is reported first.
	interrupted bool
	closed      bool
	notify      chan struct{} // capacity 1: "something changed"
	done        chan struct{} // closed by close or abandon
	doneOnce    sync.Once
	abandoned   bool // by the subscriber: stop at once
}

type item struct {
	env       keel.Envelope
	gapBefore int
}

// initialRing is how many slots a new buffer starts with; it doubles on
// demand up to the subscriber's limit.
const initialRing = 64

func newBuffer(limit int) *buffer {
	if limit <= 0 {
		limit = DefaultBuffer
	}
	return &buffer{
		items:  make([]item, min(limit, initialRing)),
		limit:  limit,
		notify: make(chan struct{}, 1),
		done:   make(chan struct{}),
	}
}

// push appends env, which follows gap events the subscriber will never see.
// It never blocks and does nothing once the buffer is closed.
func (b *buffer) push(env keel.Envelope, gap int) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	gap += b.carry
	b.carry = 0
	if b.n == len(b.items) {
		if len(b.items) < b.limit {
			b.grow()
		} else {
			// Drop the oldest: it and the gap in front of it become lost.
			old := &b.items[b.head]
			b.lost += old.gapBefore + 1
			*old = item{} // let the payload be collected
			b.head = (b.head + 1) % len(b.items)
			b.n--
		}
	}
	b.items[(b.head+b.n)%len(b.items)] = item{env: env, gapBefore: gap}
	b.n++
	b.mu.Unlock()
	b.wake()
}

// miss records n events lost after the newest pushed one (for example an
// event that could not be decoded). They are reported in front of the next
// pushed event, or at the end of the stream if none follows.
func (b *buffer) miss(n int) {
	b.mu.Lock()
	if !b.closed {
		b.carry += n
	}
	b.mu.Unlock()
	b.wake()
}

// interrupt records that events may have been lost from now on, how many
// unknown (the connection to the server dropped). The next Next reports
// it, merged with an exact gap found by then.
func (b *buffer) interrupt() {
	b.mu.Lock()
	if !b.closed {
		b.interrupted = true
	}
	b.mu.Unlock()
	b.wake()
}

func (b *buffer) grow() {
	items := make([]item, min(len(b.items)*2, b.limit))
	for i := range b.n {
		items[i] = b.items[(b.head+i)%len(b.items)]
	}
	b.items, b.head = items, 0
}

func (b *buffer) wake() {
	select {
	case b.notify <- struct{}{}:
	default:
	}
}

// next returns the next event, or a *LaggedError if events were lost in
// front of it. After close it drains what is buffered, then ErrClosed; after
// abandon it returns ErrClosed at once.
func (b *buffer) next(ctx context.Context) (keel.Envelope, error) {
	for {
		if err := ctx.Err(); err != nil {
			return keel.Envelope{}, err
		}
		b.mu.Lock()
		if b.abandoned {
			b.mu.Unlock()
			return keel.Envelope{}, ErrClosed
		}
		if b.n > 0 {
			h := &b.items[b.head]
			b.lost += h.gapBefore
			h.gapBefore = 0
		} else if b.closed {
			// Nothing follows a trailing gap any more: report it now.
			b.lost += b.carry
			b.carry = 0
		}
		if b.lost > 0 || b.interrupted {
			missed := b.lost
			b.lost, b.interrupted = 0, false
			b.mu.Unlock()
			return keel.Envelope{}, &LaggedError{Missed: missed}
		}
		if b.n > 0 {
			h := &b.items[b.head]
			env := h.env
			*h = item{}
			b.head = (b.head + 1) % len(b.items)
			b.n--
			b.mu.Unlock()
			return env, nil
		}
		closed := b.closed
		b.mu.Unlock()
		if closed {
			return keel.Envelope{}, ErrClosed
		}
		select {
		case <-b.notify:
		case <-b.done:
		case <-ctx.Done():
			return keel.Envelope{}, ctx.Err()
		}
	}
}

// close ends the stream: nothing more is accepted, buffered events remain
// readable.
func (b *buffer) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.doneOnce.Do(func() { close(b.done) })
}

// abandon ends the stream and discards what is buffered.
func (b *buffer) abandon() {
	b.mu.Lock()
	b.closed, b.abandoned = true, true
	b.items, b.head, b.n = nil, 0, 0
	b.mu.Unlock()
	b.doneOnce.Do(func() { close(b.done) })
}
