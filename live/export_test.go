package live

import (
	"context"

	"github.com/keelrun/keel"
)

// What the external tests (package live_test, which share their helpers
// with the server module's tests through internal/livetest) need of the
// package's internals.

// DecodeEnvelope is what a NATS subscriber makes of a message's body.
var DecodeEnvelope = decodeEnvelope

// InitialRing is a buffer's first capacity.
const InitialRing = initialRing

// NewBuffer returns a subscription's buffer.
var NewBuffer = newBuffer

func (b *buffer) Push(env keel.Envelope, gap int)                 { b.push(env, gap) }
func (b *buffer) Miss(n int)                                      { b.miss(n) }
func (b *buffer) Next(ctx context.Context) (keel.Envelope, error) { return b.next(ctx) }
func (b *buffer) Close()                                          { b.close() }
func (b *buffer) Abandon()                                        { b.abandon() }
