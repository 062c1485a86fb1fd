// Package bench is where keel measures itself: bare Temporal round trips
// (activity, signal, query, update) as baselines, keel's model steps and
// the latency of deltas and durable events from their source to a client,
// the live channel alone, keel-bench's whole table (Run, Targets), and
// many concurrent streaming sessions with the server's own accounting of
// each run (MeasureConcurrency, ServerCounters, ConcurrencyTargets), each
// against a baseline taken on the same embedded Temporal server in the
// same run, reported as ratios. `go test -bench . ./server/bench/`,
// devserver's tuning benchmark, `keel bench` and `keel bench concurrency`
// all use it; no library
// package of keel imports it.
//
// MeasureActivityRoundTrip's example takes a baseline on a server of its own.
package bench
