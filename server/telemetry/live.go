package telemetry

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/internal/instrument"
	"github.com/keelrun/keel/live"
)

// MeterLive returns ch with its subscriptions measured on h: each event
// delivered records keel_live_delivery_lag_seconds (now minus the event's time, which
// the worker stamped: clocks of different machines add their skew), and
// each *live.LaggedError adds its Missed to keel_live_missed_events_total.
func MeterLive(ch live.Channel, h client.MetricsHandler) live.Channel {
	return &meteredChannel{Channel: ch, lag: h.Timer(instrument.LiveDeliveryLag), missed: h.Counter(instrument.LiveMissedEventsTotal)}
}

type meteredChannel struct {
	live.Channel
	lag    client.MetricsTimer
	missed client.MetricsCounter
}

func (c *meteredChannel) Subscribe(ctx context.Context, sessionID string, opts live.SubscribeOptions) (live.Subscription, error) {
	sub, err := c.Channel.Subscribe(ctx, sessionID, opts)
	if err != nil {
		return nil, err
	}
	return &meteredSubscription{Subscription: sub, ch: c}, nil
}

type meteredSubscription struct {
	live.Subscription
	ch *meteredChannel
}

func (s *meteredSubscription) Next(ctx context.Context) (keel.Envelope, error) {
	env, err := s.Subscription.Next(ctx)
	var lagged *live.LaggedError
	switch {
	case errors.As(err, &lagged):
		s.ch.missed.Inc(int64(lagged.Missed))
	case err == nil && !env.At.IsZero():
		if lag := time.Since(env.At); lag >= 0 {
			s.ch.lag.Record(lag)
		}
	}
	return env, err
}

// LiveRejected returns a live.NATSOptions.OnReject that counts each
// received message a live channel dropped because it failed its checks in
// keel_live_rejected_messages_total, labelled with the reason.
func LiveRejected(h client.MetricsHandler) func(live.Reason) {
	return func(r live.Reason) {
		h.WithTags(map[string]string{"reason": string(r)}).Counter(instrument.LiveRejectedMessagesTotal).Inc(1)
	}
}
