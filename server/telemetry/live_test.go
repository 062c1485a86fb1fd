package telemetry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/server/internal/keeltest"
	"github.com/keelrun/keel/server/telemetry"
)

// A subscriber that falls behind is counted by what it missed; what it
// receives records its lag.
func TestMeterLive(t *testing.T) {
	clearOTEL(t)
	ctx := context.Background()
	tel, err := telemetry.Start(ctx, telemetry.Options{MetricsAddress: "127.0.0.1:0"})
	require.NoError(t, err)
	defer tel.Shutdown(ctx)
	mem := live.NewMemory()
	defer mem.Close()
	ch := telemetry.MeterLive(mem, tel.MetricsHandler())
	sub, err := ch.Subscribe(ctx, "s", live.SubscribeOptions{Buffer: 2})
	require.NoError(t, err)
	defer sub.Close()
	for i := range 5 {
		env, err := keel.Seal(keel.TextDelta{Step: 1, Attempt: 1, Text: string(rune('a' + i))}, "s", "s/run-1",
			time.Now().Add(-time.Second))
		require.NoError(t, err)
		require.NoError(t, ch.Publish(ctx, env))
	}
	_, err = sub.Next(ctx)
	var lagged *live.LaggedError
	require.True(t, errors.As(err, &lagged), "%v", err)
	require.Equal(t, 3, lagged.Missed)
	for range 2 {
		_, err := sub.Next(ctx)
		require.NoError(t, err)
	}
	m := scrape(t, tel.MetricsURL())
	require.Equal(t, 3.0, m.sum("keel_live_missed_events_total"))
	require.Equal(t, 2.0, m.count("keel_live_delivery_lag_seconds"))
	// Stamped a second ago: every delivery lagged at least that.
	require.GreaterOrEqual(t, m.histSum("keel_live_delivery_lag_seconds"), 2.0)
}

// A forged message a NATS subscriber drops is counted by its reason, and
// is never delivered.
func TestLiveRejected(t *testing.T) {
	clearOTEL(t)
	ctx := context.Background()
	tel, err := telemetry.Start(ctx, telemetry.Options{MetricsAddress: "127.0.0.1:0"})
	require.NoError(t, err)
	defer tel.Shutdown(ctx)
	srv := keeltest.StartNATSServer(t)
	ch := keeltest.DialNATS(t, srv.ClientURL(), live.NATSOptions{OnReject: telemetry.LiveRejected(tel.MetricsHandler())})
	sub, err := ch.Subscribe(ctx, "s", live.SubscribeOptions{})
	require.NoError(t, err)
	defer sub.Close()
	raw, err := nats.Connect(srv.ClientURL())
	require.NoError(t, err)
	defer raw.Close()
	require.NoError(t, raw.Publish(live.Subject(live.DefaultPrefix, "s"),
		[]byte(`{"type":"x\nid: 1","session_id":"s","run_id":"s/run-1","data":{}}`)))
	require.NoError(t, raw.Publish(live.Subject(live.DefaultPrefix, "s"), []byte(`not json`)))
	require.NoError(t, raw.Flush())
	pub := keeltest.DialNATS(t, srv.ClientURL(), live.NATSOptions{})
	env, err := keel.Seal(keel.TextDelta{Step: 1, Text: "real"}, "s", "s/run-1", time.Now())
	require.NoError(t, err)
	require.NoError(t, pub.Publish(ctx, env))
	got, err := sub.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, keel.TypeTextDelta, got.Type)
	m := scrape(t, tel.MetricsURL())
	require.Equal(t, 1.0, m.sum("keel_live_rejected_messages_total", "reason", "type"))
	require.Equal(t, 1.0, m.sum("keel_live_rejected_messages_total", "reason", "malformed"))
}
