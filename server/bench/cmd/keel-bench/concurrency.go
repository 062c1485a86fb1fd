package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/keelrun/keel/connect"
	"github.com/keelrun/keel/server/bench"
)

const concurrencyDesc = `Measures many concurrent streaming sessions against bare Temporal on this
machine. For each N of --sessions, and each phase below, it starts a fresh
embedded Temporal server as "keel dev" runs it (SQLite in a temporary
directory, keel's tuning), an embedded NATS server and a content store
(a server holding an earlier phase's executions slowed the next phase by
up to 15% at 500 sessions). The phases: N bare Temporal
workflows at once, each running the activities a keel run runs (one that
sleeps as long as the first model turn streams, a quick tool, one as long
as the second), without heartbeats (the baseline), N more started by an
update-with-start whose update the workflow accepts at once, the call
waiting for the acceptance (the update-with-start baseline: the fair
baseline of a send, and of a foreign client's run), and then N keel
sessions at once, each one send whose scripted model streams 50 chunks
100 ms apart, calls list_files and streams 20 more. --foreign adds N keel
sessions driven as a client in another language would, with Temporal's
own client alone (update-with-start of send, then the outcome update).
The keel worker ("keel-bench worker",
built as "keel worker" builds its own, with its defaults) and the
baseline's worker run as child processes (this binary, re-executed), so their CPU time is measured apart from the
server's. It prints run times (p50/p99, as ratios to the model time and to
the baselines'), send and cancel latencies (sends as ratios to the
update-with-start's), and per run the server's calls
by method, heartbeats per streaming turn, history events and workflow tasks,
billable actions by type (the server's own action counter, with keel's
ratios to the baseline's), persistence requests and CPU seconds, then
keel's targets for concurrent streaming (docs/performance.md), each marked
PASS or FAIL. --sessions 1 gives the accounting of one run quickly.
Progress goes to stderr.`

func cmdConcurrency(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("concurrency", "keel-bench concurrency [flags]", concurrencyDesc)
	sessions := fs.String("sessions", "100", "comma-separated `N`s of concurrent sessions, each measured on a server of its own")
	cancelFraction := fs.Float64("cancel-fraction", 0.1, "`fraction` of the sessions (and of the baseline's workflows) cancelled mid-stream, to time cancellation")
	inProcess := fs.Bool("in-process", false, "run the workers in this process (their CPU time then counts as the server's)")
	asJSON := fs.Bool("json", false, "print the figures as one JSON object (per-run counts, seconds, verdicts) instead of the table")
	workerFlags := fs.String("worker-flags", "", "space-separated `FLAGS` given to the keel worker process (keel-bench worker, which takes keel worker's tuning flags) besides the connection ones (\"--no-cancel-watch --workflow-pollers 32\"), to measure settings")
	foreign := fs.Bool("foreign", false, "also measure keel driven as a client in another language drives it, with Temporal's own client alone (update-with-start of send, then the outcome update; docs/foreign-clients.md), against the update-with-start baseline")
	shaped := fs.Bool("shaped", false, "also measure bare Temporal in keel's shape (a session workflow, a child run per send, the tool call as an activity), to tell what keel's design costs from what its code adds")
	follow := fs.Bool("follow", false, "keel's Go client follows each run's events to its terminal event (Run.Events, as `keel run` does) instead of waiting for its outcome: what following costs (the events query is billed)")
	remoteCodec := fs.Bool("remote-codec", false, "drive the update-with-start baseline and, with --foreign, keel's foreign-client sessions through a payload codec that calls the content store's codec endpoint over HTTP, as a client in another language configured by docs/foreign-clients.md does")
	cpuProfile := fs.String("cpu-profile", "", "write CPU profiles of the server's process over each phase to `PREFIX`-<N>-baseline.pprof, PREFIX-<N>-baseline-uws.pprof, PREFIX-<N>-keel.pprof and, with --foreign and --shaped, PREFIX-<N>-foreign.pprof and PREFIX-<N>-shaped.pprof (go tool pprof)")
	label := fs.String("label", "", "`name` of what is measured, printed in the table (a commit, \"before\"; default the binary's VCS revision if it recorded one)")
	if code, ok := fs.parse(args, stdout, stderr); !ok {
		return code
	}
	ns, err := parseSessions(*sessions)
	if err != nil {
		return fs.usageError(stderr, "--sessions: %v", err)
	}
	if *cancelFraction < 0 || *cancelFraction >= 1 {
		return fs.usageError(stderr, "--cancel-fraction must be at least 0 and below 1, got %v", *cancelFraction)
	}
	opts := bench.ConcurrencyOptions{Sessions: ns, CancelFraction: *cancelFraction, Label: *label, CPUProfile: *cpuProfile, Shaped: *shaped, Foreign: *foreign, RemoteCodec: *remoteCodec, Follow: *follow,
		Progress: func(n int, phase string) { fmt.Fprintf(stderr, "keel-bench concurrency: %d sessions: %s\n", n, phase) }}
	extra := strings.Fields(*workerFlags)
	if len(extra) > 0 {
		if *inProcess {
			return fs.usageError(stderr, "--worker-flags needs the worker in its own process (leave out --in-process)")
		}
		if code, ok := checkWorkerFlags(ctx, extra, stderr); !ok {
			return code
		}
	}
	if !*inProcess {
		opts.KeelWorker = func(ctx context.Context, cfg bench.WorkerConfig) (*bench.Process, error) {
			return startKeelWorkerProcess(ctx, cfg, extra)
		}
		opts.BaselineWorker = startBaselineWorkerProcess
	}
	rep, err := bench.MeasureConcurrency(ctx, opts)
	if rep != nil && len(rep.Points) > 0 {
		if *asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			enc.SetEscapeHTML(false)
			if jerr := enc.Encode(rep.Summary()); jerr != nil && err == nil {
				err = jerr
			}
		} else {
			rep.WriteTable(stdout)
		}
	}
	if err != nil {
		return fail(stderr, "concurrency", err)
	}
	return exitOK
}

func parseSessions(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a number of sessions", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// checkWorkerFlags parses --worker-flags as keel-bench worker does, so a typo is
// a usage error before any server starts, not a worker that never comes
// up after the baseline's minute: with --help after them, keel-bench
// worker parses the flags and stops there.
func checkWorkerFlags(ctx context.Context, extra []string, stderr io.Writer) (int, bool) {
	args := append(append([]string{}, extra...), "--help")
	if code := cmdWorker(ctx, args, io.Discard, io.Discard); code != exitOK {
		fmt.Fprintf(stderr, "keel-bench concurrency: --worker-flags %q are not flags of keel-bench worker (see keel-bench worker --help)\n", strings.Join(extra, " "))
		return exitUsage, false
	}
	return exitOK, true
}

// startKeelWorkerProcess runs `keel-bench worker` on the benchmark's
// server, NATS and content store, with keel worker's default options
// unless extra sets some.
func startKeelWorkerProcess(ctx context.Context, cfg bench.WorkerConfig, extra []string) (*bench.Process, error) {
	args := append([]string{"worker", "--address", cfg.Address, "--namespace", cfg.Namespace,
		"--nats", cfg.NATSURL, "--store", cfg.StoreURL, "--workspace", cfg.Workspace, "--scripts", cfg.Scripts}, extra...)
	w, err := startChild(ctx, workerReady, args...)
	if err != nil {
		return nil, err
	}
	return &bench.Process{PID: w.cmd.Process.Pid, Stop: w.stop}, nil
}

// startBaselineWorkerProcess runs the bare baseline's worker in a child
// process (`keel-bench baseline-worker`).
func startBaselineWorkerProcess(ctx context.Context, cfg bench.WorkerConfig) (*bench.Process, error) {
	w, err := startChild(ctx, baselineWorkerReady, "baseline-worker", "--address", cfg.Address, "--namespace", cfg.Namespace)
	if err != nil {
		return nil, err
	}
	return &bench.Process{PID: w.cmd.Process.Pid, Stop: w.stop}, nil
}

const baselineWorkerReady = "keel-bench baseline-worker: polling"

// cmdBaselineWorker is the child process of the bare baseline's worker;
// keel-bench concurrency starts it, nobody else.
func cmdBaselineWorker(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("baseline-worker", "keel-bench baseline-worker [flags]",
		"Runs the bare Temporal worker of keel-bench concurrency's baseline until interrupted.")
	address := fs.String("address", connect.DefaultHostPort, "Temporal frontend `host:port`")
	namespace := fs.String("namespace", connect.DefaultNamespace, "Temporal `namespace`")
	if code, ok := fs.parse(args, stdout, stderr); !ok {
		return code
	}
	err := bench.RunBaselineWorker(ctx, *address, *namespace, func() {
		fmt.Fprintf(stdout, "%s task queue %q on %s\n", baselineWorkerReady, bench.BaselineTaskQueue, *address)
	})
	if err != nil {
		return fail(stderr, "baseline-worker", err)
	}
	return exitOK
}
