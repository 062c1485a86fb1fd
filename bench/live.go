package livetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/live/natsserver"
)

// StartNATSServer starts an embedded NATS server on a free port and shuts
// it down when the test ends.
func StartNATSServer(tb testing.TB) *natsserver.Server {
	tb.Helper()
	srv, err := natsserver.Start(natsserver.Options{Port: natsserver.RandomPort})
	if err != nil {
		tb.Fatalf("start NATS server: %v", err)
	}
	tb.Cleanup(srv.Shutdown)
	return srv
}

// DialNATS returns a NATS channel on its own connection to url, closed when
// the test ends.
func DialNATS(tb testing.TB, url string, opts live.NATSOptions) *live.NATS {
	tb.Helper()
	ch, err := live.DialNATS(url, opts)
	if err != nil {
		tb.Fatalf("dial NATS: %v", err)
	}
	tb.Cleanup(func() { ch.Close() })
	return ch
}

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

// waitLimit bounds every wait of a measurement, so a lost event fails the
// benchmark instead of hanging it.
const waitLimit = 10 * time.Second

// MeasureLatency publishes b.N deltas one at a time, each after the
// previous one arrived, and records the time from Publish to Next
// returning it: the latency of an idle channel. It reports the p50 and p99
// under name (see Latency.Report) and returns the samples. sub must follow
// sessionID and be fed by pub.
func MeasureLatency(b *testing.B, pub live.Publisher, sub live.Subscription, sessionID, name string) *Latency {
	b.Helper()
	ctx := b.Context()
	roundTrip := func() time.Duration {
		env := Delta(sessionID)
		if err := pub.Publish(ctx, env); err != nil {
			b.Fatalf("Publish: %v", err)
		}
		wctx, cancel := context.WithTimeout(ctx, waitLimit)
		defer cancel()
		if _, err := sub.Next(wctx); err != nil {
			b.Fatalf("Next: %v", err)
		}
		return time.Since(env.At)
	}
	roundTrip() // warm up connections and buffers
	var lat Latency
	b.ResetTimer()
	for range b.N {
		lat.Add(roundTrip())
	}
	b.StopTimer()
	lat.Report(b, name)
	return &lat
}

// Paced is the outcome of MeasurePaced.
type Paced struct {
	// Latency holds, per received delta, the time from Publish to Next.
	Latency *Latency
	// Missed counts deltas the subscriber did not receive.
	Missed int
	// Rate is the publish rate achieved, in deltas per second.
	Rate float64
}

// MeasurePaced publishes b.N deltas at rate deltas per second (in bursts
// every millisecond, as a model streams) while sub reads concurrently, and
// records each delta's latency. It reports p50 and p99 under name, the
// deltas missed ("missed") and the achieved rate ("deltas/s"). A
// subscriber keeps up if it missed none.
func MeasurePaced(b *testing.B, pub live.Publisher, sub live.Subscription, sessionID string, rate int, name string) Paced {
	b.Helper()
	if rate < 1000 {
		b.Fatalf("MeasurePaced: rate %d below 1000/s", rate)
	}
	perTick := rate / 1000
	res := Paced{Latency: &Latency{}}
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()

	received := make(chan int, 1)
	go func() {
		n := 0
		for n+res.Missed < b.N {
			env, err := sub.Next(ctx)
			var lagged *live.LaggedError
			switch {
			case errors.As(err, &lagged):
				res.Missed += lagged.Missed
				continue
			case err != nil:
				received <- n
				return
			}
			res.Latency.AddSince(env.At)
			n++
		}
		received <- n
	}()

	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		if i%perTick == 0 {
			if d := time.Until(start.Add(time.Duration(i/perTick) * time.Millisecond)); d > 0 {
				time.Sleep(d)
			}
		}
		if err := pub.Publish(ctx, Delta(sessionID)); err != nil {
			b.Fatalf("Publish: %v", err)
		}
	}
	res.Rate = float64(b.N) / time.Since(start).Seconds()
	var n int
	select {
	case n = <-received:
	case <-time.After(waitLimit):
		// Events lost at the very end produce no lag report; stop waiting.
		cancel()
		n = <-received
	}
	b.StopTimer()
	// The reader goroutine has finished writing res (it sent on received).
	res.Missed = b.N - n
	res.Latency.Report(b, name)
	b.ReportMetric(float64(res.Missed), "missed")
	b.ReportMetric(res.Rate, "deltas/s")
	return res
}

// String summarizes the outcome.
func (p Paced) String() string {
	return fmt.Sprintf("%.0f deltas/s, p50 %v, p99 %v, missed %d",
		p.Rate, p.Latency.Percentile(50), p.Latency.Percentile(99), p.Missed)
}
