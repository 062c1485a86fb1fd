package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/live"
)

// The measurements below time any live.Publisher and live.Subscription,
// in process or across NATS connections. The channel's own benchmarks
// (live_test.go) and keel-bench's event latencies use them.

// Delta returns a text delta of the size a model streams (a few tokens),
// stamped with the current time in At.
func Delta(sessionID string) keel.Envelope {
	return keel.Envelope{
		Type:      keel.TypeTextDelta,
		SessionID: sessionID,
		RunID:     keel.RunID(sessionID, 1),
		At:        time.Now(),
		AfterSeq:  3,
		Data:      []byte(`{"step":1,"attempt":0,"text":"Hello, wor"}`),
	}
}

// liveWaitLimit bounds every wait of a live measurement, so a lost event
// fails the measurement instead of hanging it.
const liveWaitLimit = 10 * time.Second

// LiveRoundTrip publishes one delta for sessionID and returns the time
// from Publish to sub's Next returning it. sub must follow sessionID, be
// fed by pub, and have nothing else pending.
func LiveRoundTrip(ctx context.Context, pub live.Publisher, sub live.Subscription, sessionID string) (time.Duration, error) {
	env := Delta(sessionID)
	if err := pub.Publish(ctx, env); err != nil {
		return 0, fmt.Errorf("bench: publish: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, liveWaitLimit)
	defer cancel()
	if _, err := sub.Next(wctx); err != nil {
		return 0, fmt.Errorf("bench: next: %w", err)
	}
	return time.Since(env.At), nil
}

// MeasureLiveLatency makes n LiveRoundTrips one after the other, each
// after the previous delta arrived: the latency of an idle channel. A
// caller that times it should make one unmeasured LiveRoundTrip first, to
// warm up connections and buffers.
func MeasureLiveLatency(ctx context.Context, pub live.Publisher, sub live.Subscription, sessionID string, n int) (Latencies, error) {
	lat := make(Latencies, 0, n)
	for range n {
		d, err := LiveRoundTrip(ctx, pub, sub, sessionID)
		if err != nil {
			return lat, err
		}
		lat = append(lat, d)
	}
	return lat, nil
}

// Paced is the outcome of MeasurePaced.
type Paced struct {
	// Latency holds, per received delta, the time from Publish to Next.
	Latency Latencies
	// Missed counts deltas the subscriber did not receive.
	Missed int
	// Rate is the publish rate achieved, in deltas per second.
	Rate float64
}

// MeasurePaced publishes n deltas at rate deltas per second (at least
// 1000, in bursts every millisecond, as a model streams) while sub reads
// concurrently, and records each delta's latency. A subscriber keeps up
// if it missed none.
func MeasurePaced(ctx context.Context, pub live.Publisher, sub live.Subscription, sessionID string, rate, n int) (Paced, error) {
	if rate < 1000 {
		return Paced{}, fmt.Errorf("bench: paced rate %d below 1000/s", rate)
	}
	perTick := rate / 1000
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// The reader hands its figures over on done and touches them no more.
	type read struct {
		lat         Latencies
		got, missed int
	}
	done := make(chan read, 1)
	go func() {
		var r read
		for r.got+r.missed < n {
			env, err := sub.Next(ctx)
			var lagged *live.LaggedError
			switch {
			case errors.As(err, &lagged):
				r.missed += lagged.Missed
				continue
			case err != nil:
				done <- r
				return
			}
			r.lat = append(r.lat, time.Since(env.At))
			r.got++
		}
		done <- r
	}()

	start := time.Now()
	for i := range n {
		if i%perTick == 0 {
			// Pacing the publisher, as a model's stream is paced.
			if d := time.Until(start.Add(time.Duration(i/perTick) * time.Millisecond)); d > 0 {
				time.Sleep(d)
			}
		}
		if err := pub.Publish(ctx, Delta(sessionID)); err != nil {
			return Paced{}, fmt.Errorf("bench: publish: %w", err)
		}
	}
	res := Paced{Rate: float64(n) / time.Since(start).Seconds()}
	var r read
	select {
	case r = <-done:
	case <-time.After(liveWaitLimit):
		// Events lost at the very end produce no lag report; stop waiting.
		cancel()
		r = <-done
	}
	res.Latency, res.Missed = r.lat, n-r.got
	return res, nil
}

// Report adds the latency's p50 and p99 under name (see
// Latencies.Report), the deltas missed ("missed") and the achieved rate
// ("deltas/s").
func (p Paced) Report(r MetricReporter, name string) {
	p.Latency.Report(r, name)
	r.ReportMetric(float64(p.Missed), "missed")
	r.ReportMetric(p.Rate, "deltas/s")
}

// String summarizes the outcome.
func (p Paced) String() string {
	return fmt.Sprintf("%.0f deltas/s, p50 %v, p99 %v, missed %d",
		p.Rate, p.Latency.P50(), p.Latency.P99(), p.Missed)
}
