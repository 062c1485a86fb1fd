package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/server/internal/stack"
	"github.com/keelrun/keel/server/worker"
)

const workerDesc = `Runs a keel worker: it polls the "keel" task queue of the Temporal server at
--address (with TLS, a client certificate or an API key as the --tls* and
--api-key flags, Temporal's TEMPORAL_* environment variables or its
configuration profile say) and runs the Session workflows, model
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
	var tuning stack.Tuning
	tuning.Register(fs.FlagSet)
	var dep deploymentFlags
	dep.register(fs)
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
	if err := tuning.Check(); err != nil {
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

	enc, keys, err := loadEncryption(conn.store.keyFile, conn.store.allowPlaintext)
	if err != nil {
		return fail(stderr, "worker", err)
	}
	tel, err := telFlags.start(ctx, stderr, "worker")
	if err != nil {
		return fail(stderr, "worker", err)
	}
	defer tel.Shutdown(context.Background())
	tc, err := conn.resolve()
	if err != nil {
		return fail(stderr, "worker", err)
	}

	opts := worker.Options{Workspace: ws, StopTimeout: *stopTimeout, Logger: logger, Models: models}
	tuning.Apply(&opts)
	if err := confFlag.apply(&opts); err != nil {
		return fail(stderr, "worker", err)
	}
	dep.apply(&opts)
	// A worker writes: it refuses a store it cannot reach rather than
	// fail the first large value of some run, and accepts only ciphertext
	// unless told otherwise (whoever writes to Temporal without the keys
	// must not hand it input).
	cfg := stack.Config{Conn: &tc, DialTimeout: dialTimeout,
		Store: stack.StoreConfig{URL: conn.store.url, Check: true, Encryption: enc}, Telemetry: tel, Worker: &opts, SearchAttributes: true}
	liveNote := "off (--nats \"\")"
	if conn.nats != "" {
		// Unlike a reader, a worker lives long: connect whenever NATS comes
		// up rather than giving up on streamed text for its whole life.
		if cfg.NATSOptions, err = conn.liveOptions(&contentStore{keys: keys}, nats.RetryOnFailedConnect(true)); err != nil {
			return fail(stderr, "worker", err)
		}
		cfg.NATS = conn.nats
		liveNote = live.RedactURL(conn.nats)
		if keys != nil {
			liveNote += " (deltas encrypted)"
		}
	}
	if tel.MetricsURL() != "" || tel.TracerProvider() != nil {
		metrics, traces := telemetryNote(tel)
		fmt.Fprintf(stdout, "keel worker: metrics %s; traces %s\n", metrics, traces)
	}
	st, err := stack.Build(ctx, cfg)
	if err != nil {
		return fail(stderr, "worker", withServerHint(err))
	}
	defer st.Stop()
	storeNote := "none: large values stay in Temporal history (--store)"
	if st.Store.Store != nil {
		storeNote = st.Store.Store.URL()
	}
	if st.NATS != nil && !st.NATS.Conn().IsConnected() {
		fmt.Fprintf(stderr, "keel worker: warning: NATS at %s is not reachable yet; retrying in the background (no streamed text until then)\n", live.RedactURL(conn.nats))
	}
	fmt.Fprint(stdout, dep.note())
	fmt.Fprintf(stdout, "keel worker: polling task queue %q on %s (namespace %s)\n  config     %s\n  models     %s\n  scripts    %s\n  workspace  %s\n  live       %s\n  store      %s\n  encryption %s\nCtrl-C or SIGTERM stops it.\n",
		api.TaskQueue, tc.HostPort, tc.Namespace, confFlag.note(), models.Offer(), scriptsNote(scriptsDir), ws, liveNote, storeNote, encryptionNote(keys))
	<-ctx.Done()
	fmt.Fprintf(stdout, "keel worker: stopping; running activities get up to %v to finish…\n", *stopTimeout)
	st.Worker.Stop()
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
