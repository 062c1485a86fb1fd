package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/connect"
	"github.com/keelrun/keel/logging"
	"github.com/keelrun/keel/server/bench"
	"github.com/keelrun/keel/server/internal/stack"
	"github.com/keelrun/keel/server/provider/scripted"
	"github.com/keelrun/keel/server/worker"
)

const workerDesc = `Runs a keel worker for keel-bench's measurements until interrupted: the
worker "keel worker" runs, built the same way (package server/internal/stack) with
the same defaults and tuning flags, against the Temporal server at
--address (and nothing from Temporal's environment variables or profile),
publishing deltas to the NATS server at --nats, with large values in the
content store at --store and the scripts of --scripts offered as
scripted:NAME. With --noop-tool it also offers the no-op tool that
keel-bench's tool steps call. keel-bench starts it; so can a person, to
measure a worker elsewhere.`

// workerReady starts the line a worker prints once it polls.
const workerReady = "keel-bench worker: polling"

func cmdWorker(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("worker", "keel-bench worker [flags]", workerDesc)
	address := fs.String("address", connect.DefaultHostPort, "Temporal frontend `host:port`")
	namespace := fs.String("namespace", connect.DefaultNamespace, "Temporal `namespace`")
	natsURL := fs.String("nats", "", "NATS `URL` of the live channel; \"\" for none")
	storeURL := fs.String("store", "", "content store `URL` for large values; \"\" keeps them in Temporal")
	workspace := fs.String("workspace", "workspace", "`DIR` the file tools may read and write")
	scripts := fs.String("scripts", "", "`DIR` whose NAME.json the worker offers as scripted:NAME")
	stopTimeout := fs.Duration("stop-timeout", 10*time.Second, "how long running activities may finish on shutdown")
	noop := fs.Bool("noop-tool", false, "offer keel-bench's no-op tool next to the built-ins")
	var tuning stack.Tuning
	tuning.Register(fs.FlagSet)
	if code, ok := fs.parse(args, stdout, stderr); !ok {
		return code
	}
	if err := tuning.Check(); err != nil {
		return fs.usageError(stderr, "%v", err)
	}
	if *stopTimeout <= 0 {
		return fs.usageError(stderr, "--stop-timeout must be positive, got %v", *stopTimeout)
	}
	if err := os.MkdirAll(*workspace, 0o755); err != nil {
		return fail(stderr, "worker", err)
	}
	opts := worker.Options{Workspace: *workspace, StopTimeout: *stopTimeout, Logger: logging.Default(), Models: worker.DefaultModels()}
	tuning.Apply(&opts)
	if *scripts != "" {
		abs, err := filepath.Abs(*scripts)
		if err != nil {
			return fail(stderr, "worker", err)
		}
		dir, err := scripted.OpenDir(abs)
		if err != nil {
			return fail(stderr, "worker", err)
		}
		defer dir.Close()
		opts.Models.(*worker.Models).Scripts = dir
	}
	if *noop {
		var err error
		if opts.Tools, err = bench.Tools(*workspace); err != nil {
			return fail(stderr, "worker", err)
		}
	}
	conn, err := stack.Resolve(connect.Options{HostPort: *address, Namespace: *namespace, IgnoreEnvironment: true})
	if err != nil {
		return fail(stderr, "worker", err)
	}
	st, err := stack.Build(ctx, stack.Config{Conn: &conn, DialTimeout: 10 * time.Second,
		Store: stack.StoreConfig{URL: *storeURL, Check: true}, NATS: *natsURL, Worker: &opts, SearchAttributes: true})
	if err != nil {
		return fail(stderr, "worker", err)
	}
	defer st.Stop()
	fmt.Fprintf(stdout, "%s task queue %q on %s (namespace %s)\n", workerReady, api.TaskQueue, conn.HostPort, conn.Namespace)
	<-ctx.Done()
	return exitOK
}
