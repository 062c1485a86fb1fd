package live

import (
	"bytes"
	"context"
	"sync"

	"github.com/keelrun/keel"
)

// Memory is an in-process Channel: publishers and subscribers share one
// process. Use it in tests and when the client runs beside the worker;
// across processes use NATS.
//
// Publish hands the event to every subscriber's buffer and returns; it takes
// a short lock per subscriber and never waits for a reader. The zero value
// is not usable; call NewMemory.
type Memory struct {
	mu       sync.RWMutex
	sessions map[string]*memorySession
	closed   bool
	cancels  memoryCancels
}

// memorySession serializes publishing to one session, so all of its
// subscribers see concurrent publishers' events in the same order.
type memorySession struct {
	mu   sync.Mutex
	subs []*memorySub
}

var _ Channel = (*Memory)(nil)

// NewMemory returns an empty in-process channel.
func NewMemory() *Memory {
	return &Memory{sessions: make(map[string]*memorySession)}
}

// Publish delivers env to the current subscribers of env.SessionID. It never
// blocks on a subscriber; a full subscriber buffer drops its oldest event.
// Subscribers share one copy of env.Data and must not modify it. ctx is not
// used: Publish never waits. It returns ErrClosed after Close, a
// keel.ErrInvalidInput error for an invalid session ID, and a *RejectError
// (also a keel.ErrInvalidInput) for an event no subscriber may receive
// (Check, or larger than DefaultMaxEventBytes), which then reaches none.
func (m *Memory) Publish(_ context.Context, env keel.Envelope) error {
	if err := keel.ValidateSessionID(env.SessionID); err != nil {
		return err
	}
	if err := Check(env.SessionID, env); err != nil {
		return err
	}
	if size := env.Size(); size > DefaultMaxEventBytes {
		return reject(ReasonTooLarge, "%s event of about %d bytes is over the %d-byte bound", env.Type, size, DefaultMaxEventBytes)
	}
	m.mu.RLock()
	if m.closed {
		m.mu.RUnlock()
		return ErrClosed
	}
	s := m.sessions[env.SessionID]
	m.mu.RUnlock()
	if s == nil {
		return nil
	}
	// One copy, so the publisher may reuse its buffer after Publish returns;
	// compact, as a NATS subscriber delivers it.
	env.Data = bytes.Clone(compactData(env.Data))
	s.mu.Lock()
	for _, sub := range s.subs {
		sub.buf.push(env, 0)
	}
	s.mu.Unlock()
	return nil
}

// Subscribe follows sessionID's events published from now on. It returns
// ErrClosed after Close.
func (m *Memory) Subscribe(ctx context.Context, sessionID string, opts SubscribeOptions) (Subscription, error) {
	if err := keel.ValidateSessionID(sessionID); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sub := &memorySub{m: m, sessionID: sessionID, buf: newBuffer(opts.Buffer)}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	s := m.sessions[sessionID]
	if s == nil {
		s = &memorySession{}
		m.sessions[sessionID] = s
	}
	s.mu.Lock()
	s.subs = append(s.subs, sub)
	s.mu.Unlock()
	return sub, nil
}

// Close ends every subscription (each still returns what it had buffered,
// then ErrClosed) and makes later Publish and Subscribe calls fail with
// ErrClosed. It is idempotent and always returns nil.
func (m *Memory) Close() error {
	m.mu.Lock()
	sessions := m.sessions
	m.sessions, m.closed = nil, true
	m.mu.Unlock()
	for _, s := range sessions {
		s.mu.Lock()
		for _, sub := range s.subs {
			sub.buf.close()
		}
		s.subs = nil
		s.mu.Unlock()
	}
	return nil
}

func (m *Memory) unsubscribe(sub *memorySub) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.sessions[sub.sessionID]
	if s == nil {
		return
	}
	s.mu.Lock()
	for i, x := range s.subs {
		if x == sub {
			s.subs = append(s.subs[:i:i], s.subs[i+1:]...)
			break
		}
	}
	empty := len(s.subs) == 0
	s.mu.Unlock()
	if empty {
		delete(m.sessions, sub.sessionID)
	}
}

type memorySub struct {
	m         *Memory
	sessionID string
	buf       *buffer
	closeOnce sync.Once
}

// Next returns the next event; see Subscription.
func (s *memorySub) Next(ctx context.Context) (keel.Envelope, error) { return s.buf.next(ctx) }

// Close stops the subscription at once: buffered events are discarded and
// Next returns ErrClosed. It is idempotent.
func (s *memorySub) Close() error {
	s.closeOnce.Do(func() {
		s.m.unsubscribe(s)
		s.buf.abandon()
	})
	return nil
}
