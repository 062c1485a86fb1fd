// Package livetest helps test and benchmark code built on the live channel:
// an embedded NATS server per test, a recorder of latencies that reports
// percentiles as benchmark metrics, and ready-made latency and throughput
// measurements for any live.Publisher and live.Subscription.
//
// An end-to-end benchmark (provider chunk in the activity → client
// callback) records one sample per delta and reports p50 and p99:
//
//	func BenchmarkDeltaLatency(b *testing.B) {
//		var lat livetest.Latency
//		// … for every delta the client callback receives:
//		lat.AddSince(env.At) // env.At was set when the chunk was produced
//		// … when done:
//		lat.Report(b, "delta") // metrics delta-p50-ms and delta-p99-ms
//	}
package livetest
