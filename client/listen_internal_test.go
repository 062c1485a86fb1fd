package client

import (
	"context"
	"testing"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/live"
)

// countedSub is a live subscription that counts its closes.
type countedSub struct{ closed int }

func (s *countedSub) Next(ctx context.Context) (keel.Envelope, error) {
	return keel.Envelope{}, live.ErrClosed
}

func (s *countedSub) Close() error {
	s.closed++
	return nil
}

func TestUnlistenClosesAnUntakenSubscription(t *testing.T) {
	sub := &countedSub{}
	r := &Run{}
	r.early.Store(newEarlySub(sub))
	r.Unlisten()
	if sub.closed != 1 {
		t.Fatalf("closed %d times, want 1", sub.closed)
	}
	// Taken and closed: neither a stream nor its expiry finds it.
	if s := r.early.Load().take(); s != nil {
		t.Fatal("the subscription is still there to take")
	}
	r.Unlisten()
	(&Run{}).Unlisten()
	if sub.closed != 1 {
		t.Fatalf("closed %d times, want 1", sub.closed)
	}
}
