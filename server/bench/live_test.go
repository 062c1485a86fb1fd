package bench_test

import (
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/keelrun/keel/crypt"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/server/bench"
	"github.com/keelrun/keel/server/internal/keeltest"
)

// The live channel's benchmarks: in process, and NATS across connections.
//
//	go test -run '^$' -bench 'Live' -benchtime 2000x ./server/bench/

// pair is a publisher and a subscription to session "s1" fed by it.
type pair struct {
	pub live.Publisher
	sub live.Subscription
}

// pairs returns each way to run the channel: in process, and NATS with
// publisher and subscriber on separate connections to an embedded server
// (over TCP, as between processes, and in-process pipes, as inside
// `keel dev`).
func livePairs() []struct {
	name string
	make func(b *testing.B, buffer int) pair
} {
	subscribe := func(b *testing.B, ch live.Channel, buffer int) live.Subscription {
		sub, err := ch.Subscribe(b.Context(), "s1", live.SubscribeOptions{Buffer: buffer})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { sub.Close() })
		return sub
	}
	return []struct {
		name string
		make func(b *testing.B, buffer int) pair
	}{
		{"memory", func(b *testing.B, buffer int) pair {
			m := live.NewMemory()
			b.Cleanup(func() { m.Close() })
			return pair{m, subscribe(b, m, buffer)}
		}},
		{"nats", func(b *testing.B, buffer int) pair {
			srv := keeltest.StartNATSServer(b)
			pub := keeltest.DialNATS(b, srv.ClientURL(), live.NATSOptions{})
			sub := keeltest.DialNATS(b, srv.ClientURL(), live.NATSOptions{})
			return pair{pub, subscribe(b, sub, buffer)}
		}},
		{"nats-encrypted", func(b *testing.B, buffer int) pair {
			// As between processes with encryption at rest on: every delta
			// sealed with AES-256-GCM on the way and opened on arrival.
			srv := keeltest.StartNATSServer(b)
			keys := crypt.NewKeyring("bench", make([]byte, crypt.KeySize))
			pub := keeltest.DialNATS(b, srv.ClientURL(), live.NATSOptions{Encryption: crypt.NewCodec(keys)})
			sub := keeltest.DialNATS(b, srv.ClientURL(), live.NATSOptions{Encryption: crypt.NewCodec(keys)})
			return pair{pub, subscribe(b, sub, buffer)}
		}},
		{"nats-inprocess", func(b *testing.B, buffer int) pair {
			srv := keeltest.StartNATSServer(b)
			opts := live.NATSOptions{Dial: []nats.Option{nats.InProcessServer(srv)}}
			pub := keeltest.DialNATS(b, srv.ClientURL(), opts)
			sub := keeltest.DialNATS(b, srv.ClientURL(), opts)
			return pair{pub, subscribe(b, sub, buffer)}
		}},
	}
}

// BenchmarkLiveLatency measures publish → Next on an idle channel, one
// delta at a time.
func BenchmarkLiveLatency(b *testing.B) {
	for _, p := range livePairs() {
		b.Run(p.name, func(b *testing.B) {
			c := p.make(b, 0)
			if _, err := bench.LiveRoundTrip(b.Context(), c.pub, c.sub, "s1"); err != nil { // warm up
				b.Fatal(err)
			}
			b.ResetTimer()
			lat, err := bench.MeasureLiveLatency(b.Context(), c.pub, c.sub, "s1", b.N)
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			lat.Report(b, "")
		})
	}
}

// BenchmarkLivePaced streams deltas in 1 ms bursts to a subscriber with the
// default buffer, at 1k/s (several busy model streams), 10k/s (the
// throughput check) and 50k/s (headroom), and reports latency under load
// and whether the subscriber kept up (missed).
func BenchmarkLivePaced(b *testing.B) {
	for _, rate := range []struct {
		name string
		n    int
	}{{"1k", 1_000}, {"10k", 10_000}, {"50k", 50_000}} {
		for _, p := range livePairs() {
			b.Run(rate.name+"/"+p.name, func(b *testing.B) {
				c := p.make(b, 0)
				b.ResetTimer()
				res, err := bench.MeasurePaced(b.Context(), c.pub, c.sub, "s1", rate.n, b.N)
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				res.Report(b, "")
			})
		}
	}
}

// BenchmarkLivePublish measures what Publish costs the run while a subscriber
// reads nothing.
func BenchmarkLivePublish(b *testing.B) {
	for _, p := range livePairs() {
		b.Run(p.name, func(b *testing.B) {
			c := p.make(b, 0)
			env := bench.Delta("s1")
			b.ReportAllocs()
			for b.Loop() {
				if err := c.pub.Publish(b.Context(), env); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
