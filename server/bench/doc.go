// Package bench is where keel measures itself: bare Temporal round trips
// (activity, signal, query, update) as baselines, keel's model steps and
// the latency of deltas and durable events from their source to a client,
// the live channel alone, keel-bench's whole table (Run, Targets), many
// concurrent streaming sessions with the server's own accounting of each
// run, through keel's Go client and as a foreign client drives them,
// beside bare workflows started by a start call and by an update-with-start
// (MeasureConcurrency, ServerCounters, ConcurrencyTargets), delegation
// (MeasureDelegation) and rate-limit accuracy (MeasureRateAccuracy), each
// against a baseline taken on the same embedded Temporal server in the
// same run where one applies. `go test -bench . ./server/bench/`,
// devserver's tuning benchmark and the keel-bench command use it; no
// library package of keel imports it, nor does the keel command.
//
// MeasureActivityRoundTrip's example takes a baseline on a server of its own.
package bench
