// Package bench measures keel's overheads against baselines taken on the
// same embedded Temporal server in the same run, and reports ratios: the
// per-step cost of the run loop against bare activity round trips, the
// latency of deltas and durable events from their source to a client.
// `go test -bench . ./bench/` and `keel bench` both use it.
package bench
