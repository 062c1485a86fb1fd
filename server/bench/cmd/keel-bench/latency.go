package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/keelrun/keel/server/bench"
)

const latencyDesc = `Measures keel's overheads on this machine against bare Temporal round trips
taken on the same embedded server in the same run, and prints one table with
the targets of keel's design next to the figures, each marked PASS or MISS.
It starts its own servers (in memory, on free ports, no Web UI): a Temporal
server tuned for latency as "keel dev" runs it, a stock (untuned) one, and an
embedded NATS server. On each it measures a bare activity round trip, a keel
model step (one model turn of a scripted model, no tool) and a tool step (a
model turn plus a no-op tool), query and update round trips, the latency of
streamed deltas from the provider chunk in the activity to a client on its
own connections (via NATS, and via the in-process channel), and of durable
events from their commit to that client. With --worker-process the worker
whose deltas cross NATS is "keel-bench worker" in a child process (this
binary, re-executed), so they cross processes for real. Progress goes to
stderr. "keel-bench concurrency" measures many concurrent streaming
sessions instead (keel-bench concurrency --help).`

func cmdLatency(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("", "keel-bench [flags] | keel-bench concurrency [flags]", latencyDesc)
	// 15 runs (135 model steps a server): with 5, the model step's ratio
	// moved between 1.02× and 1.42× over runs on a quiet machine, and its
	// verdict with it (docs/performance.md).
	runs := fs.Int("runs", 15, "`N` keel runs per measurement (each of --steps model steps; a latency run streams 60 deltas)")
	steps := fs.Int("steps", 10, "`N` model steps per run of the step measurements (at least 2)")
	asJSON := fs.Bool("json", false, "print the figures as one JSON object instead of the table")
	workerProcess := fs.Bool("worker-process", false, "run the NATS latency worker as a \"keel-bench worker\" child process, so deltas cross processes")
	if code, ok := fs.parse(args, stdout, stderr); !ok {
		return code
	}
	switch {
	case *runs < 1:
		return fs.usageError(stderr, "--runs must be at least 1, got %d", *runs)
	case *steps < 2:
		// A step is the interval between two model turns.
		return fs.usageError(stderr, "--steps must be at least 2, got %d", *steps)
	}
	opts := bench.Options{Runs: *runs, Steps: *steps, Progress: func(server, phase string) {
		fmt.Fprintf(stderr, "keel-bench: %s: %s\n", server, phase)
	}}
	if *workerProcess {
		opts.WorkerProcess = startLatencyWorker
	}
	rep, err := bench.Run(ctx, opts)
	if err != nil {
		return fail(stderr, "", err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(benchJSON(rep)); err != nil {
			return fail(stderr, "", err)
		}
		return exitOK
	}
	writeBenchTable(stdout, rep)
	return exitOK
}
