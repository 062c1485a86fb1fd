package main

import (
	"context"
	"sync"

	"github.com/keelrun/keel/live"
)

// earlyChannel is a live channel on which a reader can subscribe to a
// session before it sends a prompt. The client SDK subscribes when the
// run's event stream starts, after Send returned, so a model that streams
// at once would have its first deltas published to nobody, silently (no
// lag is reported for events published before a subscription). Opening the
// subscription first and handing it to the SDK's Subscribe closes that gap.
type earlyChannel struct {
	live.Channel

	mu      sync.Mutex
	pending map[string]live.Subscription
}

var _ live.Channel = (*earlyChannel)(nil)

func newEarlyChannel(ch live.Channel) *earlyChannel {
	return &earlyChannel{Channel: ch, pending: map[string]live.Subscription{}}
}

// subscribeEarly opens the subscription the next Subscribe for sessionID
// returns.
func (c *earlyChannel) subscribeEarly(ctx context.Context, sessionID string) error {
	sub, err := c.Channel.Subscribe(ctx, sessionID, live.SubscribeOptions{})
	if err != nil {
		return err
	}
	c.mu.Lock()
	old := c.pending[sessionID]
	c.pending[sessionID] = sub
	c.mu.Unlock()
	if old != nil {
		_ = old.Close()
	}
	return nil
}

// Subscribe returns the early subscription for sessionID if there is one,
// else a new one.
func (c *earlyChannel) Subscribe(ctx context.Context, sessionID string, opts live.SubscribeOptions) (live.Subscription, error) {
	c.mu.Lock()
	sub, ok := c.pending[sessionID]
	delete(c.pending, sessionID)
	c.mu.Unlock()
	if ok {
		return sub, nil
	}
	return c.Channel.Subscribe(ctx, sessionID, opts)
}

// Close closes the subscriptions nobody took, and the channel.
func (c *earlyChannel) Close() error {
	c.mu.Lock()
	pending := c.pending
	c.pending = map[string]live.Subscription{}
	c.mu.Unlock()
	for _, sub := range pending {
		_ = sub.Close()
	}
	return c.Channel.Close()
}
