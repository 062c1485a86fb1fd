package live

import (
	"errors"
	"net/url"
	"sync"

	"github.com/nats-io/nats.go"
	commonpb "go.temporal.io/api/common/v1"
)

// maxDecodeBatch bounds the encrypted events one Decoder call decodes: one
// request to a codec endpoint.
const maxDecodeBatch = 256

// decodeQueue holds the messages of a subscription with a Decoder (a codec
// endpoint, a network round trip away) until decodeLoop takes them, all
// that arrived meanwhile at once, so a burst of deltas costs one request.
// It is bounded like nats.go's own pending queue; what does not fit is
// lost, and counted as a gap when the stream's next event arrives.
type decodeQueue struct {
	mu       sync.Mutex
	items    []received
	bytes    int
	limit    int
	stopped  bool
	wake     chan struct{} // capacity 1
	stop     chan struct{}
	stopOnce sync.Once
}

func newDecodeQueue(limit int) *decodeQueue {
	return &decodeQueue{limit: limit, wake: make(chan struct{}, 1), stop: make(chan struct{})}
}

func (q *decodeQueue) put(r received) {
	q.mu.Lock()
	if q.stopped || len(q.items) >= q.limit || q.bytes+len(r.data) > nats.DefaultSubPendingBytesLimit {
		q.mu.Unlock()
		return
	}
	q.items = append(q.items, r)
	q.bytes += len(r.data)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// take returns up to max waiting messages, oldest first, or false once
// stopped.
func (q *decodeQueue) take(max int) ([]received, bool) {
	for {
		q.mu.Lock()
		if q.stopped {
			q.mu.Unlock()
			return nil, false
		}
		if n := min(len(q.items), max); n > 0 {
			batch := append([]received(nil), q.items[:n]...)
			q.items = append(q.items[:0], q.items[n:]...)
			for _, r := range batch {
				q.bytes -= len(r.data)
			}
			q.mu.Unlock()
			return batch, true
		}
		q.mu.Unlock()
		select {
		case <-q.wake:
		case <-q.stop:
		}
	}
}

func (q *decodeQueue) close() {
	q.stopOnce.Do(func() {
		q.mu.Lock()
		q.stopped, q.items = true, nil
		q.mu.Unlock()
		close(q.stop)
	})
}

func (s *natsSub) stopDecoding() {
	if s.batch != nil {
		s.batch.close()
	}
}

// decodeLoop checks and accepts the queued messages in arrival order,
// decoding each batch's encrypted events with one Decoder call.
func (s *natsSub) decodeLoop() {
	for {
		batch, ok := s.batch.take(maxDecodeBatch)
		if !ok {
			return
		}
		s.decodeBatch(batch)
	}
}

func (s *natsSub) decodeBatch(batch []received) {
	opts := &s.c.opts
	type slot struct {
		r   received
		f   form
		p   *commonpb.Payload // sealed, then what it decoded to
		err error
	}
	slots := make([]slot, len(batch))
	var sealed []*commonpb.Payload
	var at []int
	for i, r := range batch {
		slots[i].r = r
		if len(r.data) > opts.MaxEventBytes+sealOverhead {
			slots[i].err = reject(ReasonTooLarge, "message of %d bytes is over the %d-byte bound", len(r.data), opts.MaxEventBytes)
			continue
		}
		slots[i].f, slots[i].p = classify(r.data)
		if slots[i].f == formEncrypted {
			sealed = append(sealed, slots[i].p)
			at = append(at, i)
		}
	}
	if len(sealed) > 0 {
		plain, errs := s.decodeAll(sealed)
		for j, i := range at {
			slots[i].p, slots[i].err = plain[j], errs[j]
		}
	}
	for _, sl := range slots {
		o, err := opened{}, sl.err
		if err == nil {
			switch sl.f {
			case formJSON:
				o, err = s.openPlain(sl.r)
			case formEncrypted:
				o, err = s.openDecrypted(sl.p)
			default:
				err = reject(ReasonMalformed, "message is not an event")
			}
		}
		if err != nil {
			s.c.rejected(err)
		} else {
			s.accept(o)
		}
		if s.afterHandle != nil {
			s.afterHandle()
		}
	}
}

// decodeAll decodes sealed events with one Decoder call. A call fails as
// a whole when one event of it does not decode (a forged one), so a
// failed call is split in halves and each retried, down to the events
// that fail alone: a bad event costs a few calls, never the other events.
// A failure of the network is not retried.
func (s *natsSub) decodeAll(sealed []*commonpb.Payload) ([]*commonpb.Payload, []error) {
	plain := make([]*commonpb.Payload, len(sealed))
	errs := make([]error, len(sealed))
	var split func(lo, hi int) bool
	split = func(lo, hi int) bool {
		out, err := s.c.opts.Decoder.Decode(sealed[lo:hi])
		if err == nil && len(out) == hi-lo {
			copy(plain[lo:hi], out)
			return true
		}
		var transport *url.Error
		if hi-lo == 1 || errors.As(err, &transport) {
			for j := lo; j < hi; j++ {
				errs[j] = reject(ReasonDecrypt, "event does not decode through the decoder")
			}
			return transport == nil
		}
		mid := (lo + hi) / 2
		if split(lo, mid) {
			split(mid, hi)
		} else {
			for j := mid; j < hi; j++ {
				errs[j] = reject(ReasonDecrypt, "event does not decode through the decoder")
			}
		}
		return true
	}
	split(0, len(sealed))
	return plain, errs
}
