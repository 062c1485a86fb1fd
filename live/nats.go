package live

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"math"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"go.temporal.io/sdk/converter"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/crypt"
	"github.com/keelrun/keel/internal/livehook"
	"github.com/keelrun/keel/internal/lru"
)

// DefaultPrefix is the default first token of live-channel NATS subjects.
const DefaultPrefix = "keel"

// Defaults of NATSOptions.
const (
	DefaultPublishQueue = 8192
	DefaultPendingLimit = 65536
	DefaultCloseTimeout = 2 * time.Second
)

// headerLive carries "<stream> <n>": the publishing stream's ID and the
// event's position in it (1, 2, 3, …). A stream is one channel's events for
// one session, so a subscriber finds every gap, whatever lost it (a full
// publish queue, a reconnect, a slow consumer), and counts it per publisher
// when several workers publish to one session.
const headerLive = "Keel-Live"

const (
	// maxPubStreams bounds a publisher's per-session counters. A session
	// pushed out starts a new stream (new ID) when it publishes again, which
	// subscribers take as a fresh start rather than a gap.
	maxPubStreams = 4096
	// maxSubStreams bounds the publishers one subscription remembers.
	maxSubStreams = 256
	// maxStreamID bounds a stream ID in a Keel-Live counter; keel's are
	// under 20 bytes.
	maxStreamID = 64
	// maxGap bounds the events one counter jump reports lost, so a
	// forged counter cannot overflow the count.
	maxGap = math.MaxInt32
	// defaultSubscribeTimeout bounds Subscribe's wait for the server when
	// ctx has no deadline.
	defaultSubscribeTimeout = 5 * time.Second
)

// NATSOptions configure a NATS channel. Every field is optional.
type NATSOptions struct {
	// Prefix is the first part of every subject: a session's events go to
	// <Prefix>.session.<session ID>. Default DefaultPrefix ("keel").
	Prefix string
	// PublishQueue bounds the events waiting to be written to the
	// connection. Publish never waits: when the queue is full (the server is
	// slow or the connection stalled) the event is dropped, counted in
	// Dropped, and subscribers see the gap as a *LaggedError.
	// Default DefaultPublishQueue.
	PublishQueue int
	// PendingLimit bounds the messages nats.go holds for one subscription
	// before handing them to its buffer (nats.Subscription.SetPendingLimits).
	// keel's handler only appends to the buffer, so this fills only if the
	// process is starved; what nats.go drops then is still reported as lag.
	// Default DefaultPendingLimit.
	PendingLimit int
	// CloseTimeout bounds how long Close waits to hand queued events to the
	// server. Default DefaultCloseTimeout.
	CloseTimeout time.Duration
	// Dial adds nats.Options for DialNATS (credentials, TLS,
	// nats.InProcessServer, …). They come after keel's own and win.
	Dial []nats.Option

	// MaxEventBytes bounds one event's JSON envelope: Publish refuses a
	// larger one, and a subscriber drops it (an encrypted event may be
	// larger by the encryption's overhead). Default DefaultMaxEventBytes.
	MaxEventBytes int
	// Encryption, when set, encrypts every event this channel publishes
	// with the keyring's current key, as the payloads of Temporal history
	// are (each event a Temporal Payload sealed by the codec), and
	// decrypts every event it receives with the key the event names. A
	// subscriber with Encryption drops every event that is not encrypted,
	// unless AcceptPlaintext. Cancel notices (two IDs) stay in clear.
	Encryption *crypt.Codec
	// AcceptPlaintext lets a subscriber with Encryption also accept
	// plaintext events: for a migration, while workers that do not
	// encrypt yet still publish. Off by default: with encryption on, only
	// ciphertext is accepted.
	AcceptPlaintext bool
	// Decoder decodes encrypted events for a subscriber that has no keys
	// (no Encryption), typically a codec endpoint that holds them
	// (claimcheck.NewRemoteCodec): events are decoded in batches of up to
	// maxDecodeBatch, one Decode call each, on a goroutine of the
	// subscription. Plaintext events are accepted as without it. Without
	// Encryption or Decoder, encrypted events are dropped
	// (ReasonEncrypted): such a reader shows durable events only.
	Decoder converter.PayloadCodec
	// OnReject, if set, is called with the reason of each received
	// message the channel drops because it failed its checks (see Check
	// and Reason), from nats.go's delivery goroutine: it must not block.
	// It never receives the message. Rejected counts them too.
	OnReject func(Reason)
}

func (o NATSOptions) withDefaults() (NATSOptions, error) {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if err := validatePrefix(o.Prefix); err != nil {
		return o, err
	}
	if o.PublishQueue <= 0 {
		o.PublishQueue = DefaultPublishQueue
	}
	if o.PendingLimit <= 0 {
		o.PendingLimit = DefaultPendingLimit
	}
	if o.CloseTimeout <= 0 {
		o.CloseTimeout = DefaultCloseTimeout
	}
	if o.MaxEventBytes <= 0 {
		o.MaxEventBytes = DefaultMaxEventBytes
	}
	return o, nil
}

// validatePrefix accepts one or more dot-separated subject tokens without
// wildcards or whitespace.
func validatePrefix(p string) error {
	for tok := range strings.SplitSeq(p, ".") {
		if tok == "" || strings.ContainsAny(tok, "*> \t\r\n") {
			return fmt.Errorf("live: invalid subject prefix %q: want dot-separated tokens without wildcards or spaces", p)
		}
	}
	return nil
}

// NATS is a Channel over core NATS, for subscribers in other processes or on
// other machines. Events are JSON envelopes on <prefix>.session.<id>.
//
// Publish encodes the event and queues it for a sender goroutine, so a slow,
// stalled or absent server never blocks it; events that do not fit the queue
// are dropped and counted. Each event carries a per-session counter in a
// header, so subscribers count what they lost exactly (see Subscribe).
type NATS struct {
	nc    *nats.Conn
	owned bool
	opts  NATSOptions
	id    string // distinguishes this channel's streams from other publishers'

	mu          sync.Mutex
	closed      bool
	streams     *lru.Cache[*pubStream]
	incarnation uint64
	subs        map[*natsSub]struct{}

	queue   chan outMsg
	stop    chan struct{} // closed by Close: drain the queue and exit
	sent    chan struct{} // closed when the sender goroutine exits
	dropped atomic.Int64
	rejects atomic.Int64

	closeOnce sync.Once
}

type pubStream struct {
	id  string
	seq uint64
}

// outMsg is a queued event (its subject, JSON envelope and Keel-Live
// counter), or a barrier that Flush waits on. The sender encodes it for
// the wire, encrypting it if the channel encrypts, so Publish does no
// cryptography on the run's path.
type outMsg struct {
	subject string
	data    []byte
	counter string
	barrier chan struct{}
}

var _ Channel = (*NATS)(nil)

// NewNATS returns a channel over nc, which stays the caller's: Close does not
// close it. The server must support headers (NATS 2.2 or later).
func NewNATS(nc *nats.Conn, opts NATSOptions) (*NATS, error) {
	if nc == nil {
		return nil, errors.New("live: nil NATS connection")
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &NATS{
		nc:      nc,
		opts:    opts,
		id:      rand.Text()[:12],
		streams: lru.New[*pubStream](maxPubStreams),
		subs:    make(map[*natsSub]struct{}),
		queue:   make(chan outMsg, opts.PublishQueue),
		stop:    make(chan struct{}),
		sent:    make(chan struct{}),
	}
	// Subscribers cannot tell what was published while the connection
	// was down (a stream that ended meanwhile never shows its gap): each
	// is told it may have lost events. The caller's own handler still runs.
	prev := nc.DisconnectErrHandler()
	nc.SetDisconnectErrHandler(func(nc *nats.Conn, err error) {
		if prev != nil {
			prev(nc, err)
		}
		if !nc.IsClosed() { // closed for good: subscriptions end instead
			c.interrupted()
		}
	})
	go c.send()
	return c, nil
}

// interrupted tells every subscription that events may have been lost.
func (c *NATS) interrupted() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for s := range c.subs {
		s.buf.interrupt()
	}
}

// DialNATS connects to the NATS server at url (a comma-separated list is
// fine) and returns a channel that owns the connection. The connection
// reconnects forever, every 250 ms (plus nats.go's jitter); pings every
// 10 s; abandons a write stalled for 2 s and reconnects; and logs
// asynchronous server errors with the standard logger, except slow-consumer
// drops, which subscribers report as lag. opts.Dial may override all that
// and adds credentials and TLS. Errors name the servers without the
// credentials a URL may hold.
func DialNATS(url string, opts NATSOptions) (*NATS, error) {
	nopts := append([]nats.Option{
		nats.Name("keel live"),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		// Live events are worthless late: notice a dead server in about
		// 20 s rather than nats.go's 4 minutes, and give up on a stalled
		// write after 2 s instead of 1 minute (nats.go holds the
		// connection's lock while writing, so everything else waits).
		nats.PingInterval(10 * time.Second),
		nats.FlusherTimeout(2 * time.Second),
		nats.ReconnectOnFlusherError(),
		nats.ErrorHandler(logAsyncError),
	}, opts.Dial...)
	nc, err := nats.Connect(url, nopts...)
	if err != nil {
		return nil, fmt.Errorf("live: connect to NATS at %s: %w", RedactURL(url), err)
	}
	c, err := NewNATS(nc, opts)
	if err != nil {
		nc.Close()
		return nil, err
	}
	c.owned = true
	return c, nil
}

// RedactURL returns a NATS server URL (or a comma-separated list) without
// the user information any of them holds, for messages and logs.
func RedactURL(servers string) string {
	parts := strings.Split(servers, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		u, err := url.Parse(p)
		switch {
		case err != nil && strings.Contains(p, "@"):
			parts[i] = "(a URL with credentials)"
		case err == nil && u.User != nil:
			u.User = nil
			parts[i] = u.String()
		default:
			parts[i] = p
		}
	}
	return strings.Join(parts, ",")
}

// logAsyncError reports errors the server sends asynchronously (such as a
// permissions violation). A slow consumer is not one: subscribers see it as
// a *LaggedError, with the count.
func logAsyncError(_ *nats.Conn, sub *nats.Subscription, err error) {
	if errors.Is(err, nats.ErrSlowConsumer) {
		return
	}
	if sub != nil {
		log.Printf("live: NATS subscription %s: %v", sub.Subject, err)
		return
	}
	log.Printf("live: NATS: %v", err)
}

// Conn returns the channel's NATS connection.
func (c *NATS) Conn() *nats.Conn { return c.nc }

// Publish queues env for the subject of env.SessionID and returns without
// waiting for the network. If the queue is full the event is dropped (see
// Dropped) and subscribers will report it as lag. Events of one session are
// sent in the order Publish was called. ctx is not used: Publish never
// waits. It returns ErrClosed after Close, a keel.ErrInvalidInput error for
// an invalid session ID, a *RejectError (also a keel.ErrInvalidInput) for
// an event no subscriber would accept (its fields fail Check, or it is
// encoded larger than MaxEventBytes), and an error if env cannot be
// encoded. Data that is a JSON object but does not decode as the type's
// event is not looked into here: every subscriber drops it.
func (c *NATS) Publish(_ context.Context, env keel.Envelope) error {
	if err := keel.ValidateSessionID(env.SessionID); err != nil {
		return err
	}
	if err := checkFields(env.SessionID, env); err != nil {
		return err
	}
	data, err := json.Marshal(env)
	if err != nil {
		return fmt.Errorf("live: encode %s event: %w", env.Type, err)
	}
	if len(data) > c.opts.MaxEventBytes {
		return reject(ReasonTooLarge, "%s event of %d bytes is over the %d-byte bound", env.Type, len(data), c.opts.MaxEventBytes)
	}
	o := outMsg{subject: Subject(c.opts.Prefix, env.SessionID), data: data}

	// Numbering and queueing under one lock keep the counter in queue order,
	// which is wire order: the single sender preserves it.
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	st, ok := c.streams.Get(env.SessionID)
	if !ok {
		c.incarnation++
		st = &pubStream{id: c.id + "." + strconv.FormatUint(c.incarnation, 36)}
		c.streams.Put(env.SessionID, st)
	}
	st.seq++
	o.counter = st.id + " " + strconv.FormatUint(st.seq, 10)
	select {
	case c.queue <- o:
	default:
		c.dropped.Add(1)
	}
	return nil
}

// Dropped returns how many events this channel failed to hand to NATS: the
// publish queue was full, the connection refused them (closed, or its
// reconnect buffer full), or they could not be encrypted.
func (c *NATS) Dropped() int64 { return c.dropped.Load() }

// Rejected returns how many received messages this channel dropped because
// they failed its checks: events (see Check and Reason) and cancel
// notices. A rejected message is never delivered and never counted as
// lag.
func (c *NATS) Rejected() int64 { return c.rejects.Load() }

// rejected counts a received message dropped for err.
func (c *NATS) rejected(err error) {
	c.rejects.Add(1)
	if c.opts.OnReject == nil {
		return
	}
	var re *RejectError
	if errors.As(err, &re) {
		c.opts.OnReject(re.Reason)
	} else {
		c.opts.OnReject(ReasonMalformed)
	}
}

// send is the only writer to the connection. It may block inside nats.go on
// a stalled socket (up to the connection's FlusherTimeout); Publish does
// not, because it only touches the queue.
func (c *NATS) send() {
	defer close(c.sent)
	for {
		select {
		case o := <-c.queue:
			c.deliver(o)
		case <-c.stop:
			for {
				select {
				case o := <-c.queue:
					c.deliver(o)
				default:
					return
				}
			}
		}
	}
}

func (c *NATS) deliver(o outMsg) {
	if o.barrier != nil {
		close(o.barrier)
		return
	}
	msg, err := c.encode(o)
	if err == nil {
		err = c.nc.PublishMsg(msg)
	}
	if err != nil {
		c.dropped.Add(1)
	}
}

// Flush waits until the events published before it reached the server. It
// is for tests and orderly shutdown; the run never needs it. Without a
// deadline in ctx it waits at most 5 seconds.
func (c *NATS) Flush(ctx context.Context) error {
	ctx, cancel := withDefaultTimeout(ctx, defaultSubscribeTimeout)
	defer cancel()
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return ErrClosed
	}
	barrier := make(chan struct{})
	select {
	case c.queue <- outMsg{barrier: barrier}:
	case <-c.sent:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-barrier:
	case <-c.sent:
		// Close drained the queue, barrier included, unless the sender
		// had already exited when the barrier got in.
		select {
		case <-barrier:
		default:
			return ErrClosed
		}
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := c.nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("live: flush NATS: %w", err)
	}
	return nil
}

// Subscribe follows sessionID's events. It returns once the server has
// registered the subscription, so every event published after it returns
// is delivered (unless lost, which is reported). Without a deadline in ctx
// it waits at most 5 seconds for the server. While the connection is down
// it returns at once, and the subscription's first Next reports a
// *LaggedError of Missed 0: it starts when the connection is back.
//
// Every message is checked before it is delivered (Check, the size bound,
// and with Encryption that it is encrypted and decrypts): one that fails
// is dropped and counted in Rejected, never delivered and never counted
// as lag.
//
// Lag is counted per publishing stream: an event whose counter jumps by
// k+1 over the previous one from the same stream follows a *LaggedError
// with Missed k. Events lost before the first one a subscription receives
// from a stream cannot be told from events published before it subscribed,
// and are not reported; neither are events lost at the end of a stream
// until that stream publishes again. The durable log covers both: see
// docs/live.md.
func (c *NATS) Subscribe(ctx context.Context, sessionID string, opts SubscribeOptions) (Subscription, error) {
	if err := keel.ValidateSessionID(sessionID); err != nil {
		return nil, err
	}
	s := &natsSub{
		c:           c,
		session:     sessionID,
		buf:         newBuffer(opts.Buffer),
		streams:     lru.New[uint64](maxSubStreams),
		afterHandle: livehook.Handled(ctx),
	}
	if c.opts.Decoder != nil && c.opts.Encryption == nil {
		s.batch = newDecodeQueue(c.opts.PendingLimit)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	c.subs[s] = struct{}{}
	c.mu.Unlock()

	ns, err := c.nc.Subscribe(Subject(c.opts.Prefix, sessionID), s.handle)
	if err != nil {
		c.forget(s)
		return nil, fmt.Errorf("live: subscribe to session %s: %w", sessionID, err)
	}
	// The connection closing ends the subscription like Close does.
	ns.SetClosedHandler(func(string) { s.buf.close(); s.stopDecoding() })
	if err := ns.SetPendingLimits(c.opts.PendingLimit, nats.DefaultSubPendingBytesLimit); err != nil {
		_ = ns.Unsubscribe()
		c.forget(s)
		return nil, fmt.Errorf("live: subscribe to session %s: %w", sessionID, err)
	}
	if !s.attach(ns) { // the channel closed meanwhile
		_ = ns.Unsubscribe()
		return nil, ErrClosed
	}
	if s.batch != nil {
		go s.decodeLoop()
	}
	if !c.nc.IsConnected() {
		// The server is out of reach: nats.go sends the subscription when
		// it reconnects, and events published until then are lost to it.
		// Waiting for the server here would hold the caller (a client
		// following durable events, a send) for as long as it is down.
		s.buf.interrupt()
		return s, nil
	}
	fctx, cancel := withDefaultTimeout(ctx, defaultSubscribeTimeout)
	defer cancel()
	if err := c.nc.FlushWithContext(fctx); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("live: subscribe to session %s: %w", sessionID, err)
	}
	return s, nil
}

func (c *NATS) forget(s *natsSub) {
	c.mu.Lock()
	delete(c.subs, s)
	c.mu.Unlock()
}

// Close stops publishing, hands queued events to the server (waiting at
// most CloseTimeout), and ends every subscription: each still returns what
// it had buffered, then ErrClosed. It closes the connection only if
// DialNATS opened it; on a stalled connection that may add the
// connection's write timeout (2 s with DialNATS). It is idempotent and
// returns nil.
func (c *NATS) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		subs := c.subs
		c.subs = nil
		c.mu.Unlock()

		close(c.stop)
		deadline := time.Now().Add(c.opts.CloseTimeout)
		timer := time.NewTimer(c.opts.CloseTimeout)
		select {
		case <-c.sent:
			// Wait for the server only if there is one: while reconnecting,
			// nats.go keeps the events for the next connection anyway.
			if left := time.Until(deadline); left > 0 && c.nc.IsConnected() {
				_ = c.nc.FlushTimeout(left)
			}
		case <-timer.C:
			// The sender is stuck on a stalled connection; give up on
			// the queue rather than hang the caller.
		}
		timer.Stop()
		for s := range subs {
			s.end(false)
		}
		if c.owned {
			c.nc.Close()
		}
	})
	return nil
}

// natsSub is one subscription. nats.go calls handle from one goroutine per
// subscription, one message at a time; with a Decoder, decodeLoop takes
// over from it. Either way one goroutine accepts events, so streams needs
// no lock.
type natsSub struct {
	c       *NATS
	session string
	buf     *buffer
	streams *lru.Cache[uint64] // last counter seen per publishing stream
	batch   *decodeQueue       // with a Decoder: messages waiting for it

	mu    sync.Mutex
	sub   *nats.Subscription
	ended bool

	// afterHandle is a test's hook (internal/livehook), called after each
	// received message is handled.
	afterHandle func()
}

func (s *natsSub) attach(ns *nats.Subscription) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return false
	}
	s.sub = ns
	return true
}

// end unsubscribes; abandon discards the buffer, otherwise it drains.
func (s *natsSub) end(abandon bool) {
	s.mu.Lock()
	ns := s.sub
	s.ended = true
	s.mu.Unlock()
	if abandon {
		s.buf.abandon()
	} else {
		s.buf.close()
	}
	s.stopDecoding()
	if ns != nil {
		_ = ns.Unsubscribe() // fails only if the connection is closed: nothing to undo
	}
}

func (s *natsSub) handle(m *nats.Msg) {
	r := received{data: m.Data, counter: m.Header.Get(headerLive)}
	if s.batch != nil {
		// Decoded in order on decodeLoop; what does not fit is lost, and
		// shows as a gap in front of its stream's next event.
		s.batch.put(r)
		return
	}
	if s.afterHandle != nil {
		defer s.afterHandle()
	}
	o, err := s.open(r)
	if err != nil {
		s.c.rejected(err)
		return
	}
	s.accept(o)
}

// accept delivers an event that passed its checks, after the gap its
// stream counter reveals.
func (s *natsSub) accept(o opened) {
	gap := 0
	if o.counts {
		last, seen := s.streams.Get(o.stream)
		if seen && o.n <= last {
			return // a repeat; core NATS does not redeliver, but never show one twice
		}
		if seen {
			gap = int(min(o.n-last-1, maxGap))
		}
		s.streams.Put(o.stream, o.n)
	}
	s.buf.push(o.env, gap)
}

// Next returns the next event; see Subscription.
func (s *natsSub) Next(ctx context.Context) (keel.Envelope, error) { return s.buf.next(ctx) }

// Close unsubscribes at once: buffered events are discarded and Next
// returns ErrClosed. It is idempotent.
func (s *natsSub) Close() error {
	s.end(true)
	s.c.forget(s)
	return nil
}

func withDefaultTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
}
