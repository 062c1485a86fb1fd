package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/keelrun/keel/bench"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/logging"
	"github.com/keelrun/keel/worker"
	"github.com/keelrun/keel/workflows"
)

const workerDesc = `Runs a keel worker: it polls the "keel" task queue of the Temporal server at
--address (with TLS, a client certificate or an API key as the --tls* and
--api-key flags, Temporal's TEMPORAL_* environment variables or its
configuration profile say) and runs the Session and Run workflows, model
turns and tools, with the file tools confined to --workspace (created if
missing). Model API keys are read here, from the environment
(OPENAI_API_KEY, ANTHROPIC_API_KEY), and never travel through Temporal.
Streamed text goes to the NATS server at --nats; if it is unreachable the
worker keeps trying in the background and runs go on without streamed text.
Large values (tool output, transcripts, run results, old session events) go
to the content store at --store and Temporal keeps references; every worker
of a deployment and every reader must reach the same store (readers
directly, or through keel's codec endpoint). Without --store they stay in
Temporal history, which bounds how long a session can grow. On SIGINT or
SIGTERM it stops polling and lets running activities finish for up to
--stop-timeout.`

func cmdWorker(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("worker", "keel worker [flags]", workerDesc)
	var conn connFlags
	conn.register(fs, true)
	workspace := fs.String("workspace", "workspace", "`DIR` the file tools may read and write")
	stopTimeout := fs.Duration("stop-timeout", 10*time.Second, "how long running activities may finish on shutdown")
	var logs logFlags
	logs.register(fs, "to stderr", "")
	var tuning tuningFlags
	tuning.register(fs)
	var dep deploymentFlags
	dep.register(fs)
	// keel bench runs its latency script, which calls the no-op tool, on a
	// worker in a child process; nothing else should offer that tool.
	benchTools := fs.Bool("bench-tools", false, "offer the no-op tool of keel bench too")
	fs.hide("bench-tools")
	var confFlag configFlag
	confFlag.register(fs)
	var modelOpts modelFlags
	modelOpts.register(fs, " (default: keel.yaml's scripts, else none)")
	var telFlags telemetryFlags
	telFlags.register(fs, "")
	var hosts hostsFlag
	hosts.register(fs, "the metrics endpoint (--metrics-address) should")
	telFlags.hosts = &hosts
	if _, code, ok := fs.parse(args, stdout, stderr, 0, 0); !ok {
		return code
	}
	if err := confFlag.load(); err != nil {
		return fail(stderr, "worker", err)
	}
	if err := modelOpts.check(); err != nil {
		return fs.usageError(stderr, "%v", err)
	}
	scriptsDir := modelOpts.scriptsDir(fs, &confFlag, "")
	models, err := newModels(scriptsDir, modelOpts.allow)
	if err != nil {
		return fail(stderr, "worker", err)
	}
	if *stopTimeout <= 0 {
		return fs.usageError(stderr, "--stop-timeout must be positive, got %v", *stopTimeout)
	}
	if err := tuning.check(); err != nil {
		return fs.usageError(stderr, "%v", err)
	}
	logger, _, err := logs.logger(stderr)
	if err != nil {
		return fs.usageError(stderr, "%v", err)
	}
	defer func() { _ = logger.Sync() }()
	if err := dep.check(); err != nil {
		return fs.usageError(stderr, "%v", err)
	}
	ws, err := prepareWorkerWorkspace(confFlag.workspace(fs, *workspace))
	if err != nil {
		return fail(stderr, "worker", err)
	}

	cs, err := conn.store.open(ctx)
	if err != nil {
		return fail(stderr, "worker", err)
	}
	defer cs.close()
	tel, err := telFlags.start(ctx, stderr, "worker")
	if err != nil {
		return fail(stderr, "worker", err)
	}
	defer tel.Shutdown(context.Background())
	tc, err := conn.dialTemporal(ctx, tel.ClientOptions(sdkclient.Options{Logger: logging.Temporal(logger), DataConverter: cs.dc}))
	if err != nil {
		return fail(stderr, "worker", err)
	}
	defer tc.Close()
	if err := worker.EnsureSearchAttributes(ctx, tc, conn.namespace); err != nil {
		return fail(stderr, "worker", err)
	}

	opts := worker.Options{Namespace: conn.namespace, Workspace: ws, StopTimeout: *stopTimeout, Logger: logger, Codec: cs.codec,
		Models: models}
	tuning.apply(&opts)
	opts = tel.WorkerOptions(opts)
	if err := confFlag.apply(&opts); err != nil {
		return fail(stderr, "worker", err)
	}
	dep.apply(&opts)
	storeNote := "none: large values stay in Temporal history (--store)"
	if cs.codec != nil {
		storeNote = cs.where
	}
	if *benchTools {
		if opts.Tools, err = bench.Tools(ws); err != nil {
			return fail(stderr, "worker", err)
		}
	}
	liveNote := "off (--nats \"\")"
	if conn.nats != "" {
		// Unlike a reader, a worker lives long: connect whenever NATS comes
		// up rather than giving up on streamed text for its whole life.
		pub, err := conn.dialLive(cs, nats.RetryOnFailedConnect(true))
		if err != nil {
			return fail(stderr, "worker", err)
		}
		defer pub.Close()
		opts.Live = pub
		liveNote = live.RedactURL(conn.nats)
		if cs.keys != nil {
			liveNote += " (deltas encrypted)"
		}
		if !pub.Conn().IsConnected() {
			fmt.Fprintf(stderr, "keel worker: warning: NATS at %s is not reachable yet; retrying in the background (no streamed text until then)\n", live.RedactURL(conn.nats))
		}
	}
	if tel.MetricsURL() != "" || tel.TracerProvider() != nil {
		metrics, traces := telemetryNote(tel)
		fmt.Fprintf(stdout, "keel worker: metrics %s; traces %s\n", metrics, traces)
	}
	w, err := worker.New(tc, opts)
	if err != nil {
		return fail(stderr, "worker", err)
	}
	if err := w.Start(); err != nil {
		return fail(stderr, "worker", err)
	}
	fmt.Fprint(stdout, dep.note())
	fmt.Fprintf(stdout, "keel worker: polling task queue %q on %s (namespace %s)\n  config     %s\n  models     %s\n  scripts    %s\n  workspace  %s\n  live       %s\n  store      %s\n  encryption %s\nCtrl-C or SIGTERM stops it.\n",
		workflows.TaskQueue, conn.address, conn.namespace, confFlag.note(), models.Offer(), scriptsNote(scriptsDir), ws, liveNote, storeNote, encryptionNote(cs.keys))
	<-ctx.Done()
	fmt.Fprintf(stdout, "keel worker: stopping; running activities get up to %v to finish…\n", *stopTimeout)
	w.Stop()
	fmt.Fprintln(stdout, "keel worker: stopped.")
	return exitOK
}

// prepareWorkerWorkspace creates the workspace if missing. Unlike
// `keel dev`, it seeds nothing: a worker's workspace is the operator's.
func prepareWorkerWorkspace(dir string) (string, error) {
	if dir == "" {
		return "", fmt.Errorf("--workspace must name a directory")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("workspace: %w", err)
	}
	return dir, nil
}
