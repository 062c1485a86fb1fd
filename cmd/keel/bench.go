package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/keelrun/keel/bench"
	"github.com/keelrun/keel/live/natsserver"
)

const benchDesc = `Measures keel's overheads on this machine against bare Temporal round trips
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
whose deltas cross NATS is "keel worker" in a child process (this binary,
re-executed), so they cross processes for real. Progress goes to stderr.`

// benchConfig is what a bench measures.
type benchConfig struct {
	runs, steps   int
	workerProcess bool
	// progress receives one line per phase.
	progress io.Writer
}

func cmdBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("bench", "keel bench [flags]", benchDesc)
	runs := fs.Int("runs", 5, "`N` keel runs per measurement (each of --steps model steps; a latency run streams 60 deltas)")
	steps := fs.Int("steps", 10, "`N` model steps per run of the step measurements (at least 2)")
	asJSON := fs.Bool("json", false, "print the figures as one JSON object instead of the table")
	workerProcess := fs.Bool("worker-process", false, "run the NATS latency worker as a \"keel worker\" child process, so deltas cross processes")
	if _, code, ok := fs.parse(args, stdout, stderr, 0, 0); !ok {
		return code
	}
	switch {
	case *runs < 1:
		return fs.usageError(stderr, "--runs must be at least 1, got %d", *runs)
	case *steps < 2:
		// A step is the interval between two model turns.
		return fs.usageError(stderr, "--steps must be at least 2, got %d", *steps)
	}
	rep, err := runBench(ctx, benchConfig{runs: *runs, steps: *steps, workerProcess: *workerProcess, progress: stderr})
	if err != nil {
		return fail(stderr, "bench", err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(rep.jsonReport()); err != nil {
			return fail(stderr, "bench", err)
		}
		return exitOK
	}
	rep.writeTable(stdout)
	return exitOK
}

// runBench measures on a tuned and on an untuned server, one after the
// other, sharing one NATS server.
func runBench(ctx context.Context, cfg benchConfig) (*benchReport, error) {
	if cfg.progress == nil {
		cfg.progress = io.Discard
	}
	dir, err := os.MkdirTemp("", "keel-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	// The latency script goes to a file so a worker in another process
	// resolves it too, as scripted:FILE.
	script := filepath.Join(dir, "latency.json")
	if err := os.WriteFile(script, []byte(bench.LatencyScript), 0o600); err != nil {
		return nil, err
	}
	ns, err := natsserver.Start(natsserver.Options{Port: natsserver.RandomPort})
	if err != nil {
		return nil, fmt.Errorf("start NATS: %w", err)
	}
	defer ns.Shutdown()

	rep := &benchReport{runs: cfg.runs, steps: cfg.steps, workerProcess: cfg.workerProcess, load: loadAverage()}
	for _, tuned := range []bool{true, false} {
		b := &serverBench{cfg: cfg, tuned: tuned, natsURL: ns.ClientURL(), model: "scripted:" + script, dir: dir}
		figs, err := b.measure(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s server: %w", b.name(), err)
		}
		if tuned {
			rep.tuned = figs
		} else {
			rep.untuned = figs
		}
	}
	return rep, nil
}
