package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	sdkclient "go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/keelrun/keel/activities"
	"github.com/keelrun/keel/bench"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/devserver"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/tool"
	"github.com/keelrun/keel/worker"
)

// minProbes is the fewest samples of a bare round trip: with few steps
// (`--runs 1 --steps 3`) the baseline would otherwise rest on two samples.
const minProbes = 20

// serverBench measures everything on one server.
type serverBench struct {
	cfg     benchConfig
	tuned   bool
	natsURL string
	model   string // the latency script, scripted:FILE
	dir     string // scratch space

	srv *devserver.Server
	// Separate Temporal connections for the probes, the workers and the
	// client, as separate processes would have.
	probe, work, user sdkclient.Client
}

func (b *serverBench) name() string {
	if b.tuned {
		return "tuned"
	}
	return "untuned"
}

func (b *serverBench) say(format string, args ...any) {
	fmt.Fprintf(b.cfg.progress, "keel bench: %s: %s\n", b.name(), fmt.Sprintf(format, args...))
}

// measure starts the server, takes every figure, and stops it again.
func (b *serverBench) measure(ctx context.Context) (f serverFigures, err error) {
	b.say("starting an in-memory Temporal server")
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	b.srv, err = devserver.Start(ctx, devserver.Config{
		Port: devserver.AnyPort, DisableUI: true, Untuned: !b.tuned, Logger: quiet, LogLevel: slog.LevelError,
	})
	if err != nil {
		return f, err
	}
	defer b.srv.Stop()
	for _, c := range []*sdkclient.Client{&b.probe, &b.work, &b.user} {
		if *c, err = b.srv.Dial(ctx, sdkclient.Options{}); err != nil {
			return f, err
		}
		defer (*c).Close()
	}

	if f.modelStep, err = b.steps(ctx, "missing"); err != nil {
		return f, fmt.Errorf("model steps: %w", err)
	}
	if f.toolStep, err = b.steps(ctx, "noop"); err != nil {
		return f, fmt.Errorf("tool steps: %w", err)
	}
	b.say("bare activity, query and update round trips")
	n := max(len(f.modelStep.samples), minProbes)
	if _, err := devserver.MeasureActivityRoundTrip(ctx, b.probe, "", 5); err != nil { // warm up
		return f, err
	}
	bare, err := devserver.MeasureActivityRoundTrip(ctx, b.probe, "", n)
	if err != nil {
		return f, err
	}
	f.bare = newFigure(bare)
	query, err := devserver.MeasureQueryRoundTrip(ctx, b.probe, "", n)
	if err != nil {
		return f, err
	}
	f.query = newFigure(query)
	update, err := devserver.MeasureUpdateRoundTrip(ctx, b.probe, "", n)
	if err != nil {
		return f, err
	}
	f.update = newFigure(update)

	var lat bench.EventLatency
	if lat, err = b.latencyNATS(ctx); err != nil {
		return f, fmt.Errorf("latency via NATS: %w", err)
	}
	f.deltaNATS, f.durable = newFigure(lat.Deltas), newFigure(lat.Durable)
	if lat, err = b.latencyMemory(ctx); err != nil {
		return f, fmt.Errorf("latency in-process: %w", err)
	}
	f.deltaMemory = newFigure(lat.Deltas)
	return f, nil
}

// steps measures model steps whose model calls toolName: "noop" makes each
// step a model turn and a tool activity, anything else a model turn only
// (a tool the run does not offer is answered by the workflow itself).
func (b *serverBench) steps(ctx context.Context, toolName string) (figure, error) {
	b.say("%d %s of %d steps calling %q", b.cfg.runs, plural(b.cfg.runs, "run", "runs"), b.cfg.steps, toolName)
	models := bench.NewStampingModels(b.cfg.steps, toolName)
	w, err := b.startWorker(models, nil)
	if err != nil {
		return figure{}, err
	}
	defer w.Stop()
	kc, err := client.Dial(ctx, client.Options{Temporal: b.user})
	if err != nil {
		return figure{}, err
	}
	defer kc.Close()
	if _, err := bench.MeasureSteps(ctx, kc, models, 1, b.cfg.steps); err != nil { // warm up
		return figure{}, err
	}
	steps, err := bench.MeasureSteps(ctx, kc, models, b.cfg.runs, b.cfg.steps)
	return newFigure(steps), err
}

// latencyNATS measures deltas and durable events reaching a client on its
// own Temporal and NATS connections from a worker publishing to NATS: in
// this process on connections of its own, or with --worker-process in a
// `keel worker` child process.
func (b *serverBench) latencyNATS(ctx context.Context) (bench.EventLatency, error) {
	if b.cfg.workerProcess {
		b.say("deltas via NATS from a `keel worker` child process")
		child, err := startBenchWorker(ctx, b.srv.Address(), b.srv.Namespace(), b.natsURL, b.dir)
		if err != nil {
			return bench.EventLatency{}, err
		}
		defer child.stop()
	} else {
		b.say("deltas via NATS from a worker on its own connections")
		pub, err := live.DialNATS(b.natsURL, live.NATSOptions{})
		if err != nil {
			return bench.EventLatency{}, err
		}
		defer pub.Close()
		w, err := b.startWorker(&worker.Models{}, pub)
		if err != nil {
			return bench.EventLatency{}, err
		}
		defer w.Stop()
	}
	sub, err := live.DialNATS(b.natsURL, live.NATSOptions{})
	if err != nil {
		return bench.EventLatency{}, err
	}
	defer sub.Close()
	return b.eventLatency(ctx, sub)
}

// latencyMemory measures the same with the in-process live channel.
func (b *serverBench) latencyMemory(ctx context.Context) (bench.EventLatency, error) {
	b.say("deltas via the in-process channel")
	mem := live.NewMemory()
	defer mem.Close()
	w, err := b.startWorker(&worker.Models{}, mem)
	if err != nil {
		return bench.EventLatency{}, err
	}
	defer w.Stop()
	return b.eventLatency(ctx, mem)
}

func (b *serverBench) eventLatency(ctx context.Context, ch live.Channel) (bench.EventLatency, error) {
	kc, err := client.Dial(ctx, client.Options{Temporal: b.user, Live: ch})
	if err != nil {
		return bench.EventLatency{}, err
	}
	defer kc.Close()
	// The warm-up run also waits until a child worker process polls.
	if _, err := bench.MeasureEventLatency(ctx, kc, b.model, 1); err != nil {
		return bench.EventLatency{}, err
	}
	return bench.MeasureEventLatency(ctx, kc, b.model, b.cfg.runs)
}

// startWorker starts a keel worker in this process with the no-op tool
// next to the built-ins. Only one worker runs at a time: they all poll
// keel's task queue, and the measurements need theirs to answer.
func (b *serverBench) startWorker(models activities.ModelResolver, pub live.Publisher) (sdkworker.Worker, error) {
	tools, err := benchToolsOn(b.dir)
	if err != nil {
		return nil, err
	}
	w, err := worker.New(b.work, worker.Options{
		Models: models, Tools: tools, Live: pub, StopTimeout: time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return nil, err
	}
	return w, w.Start()
}

// benchToolsOn is the built-in tools on workspace plus bench.NoopTool, what
// `keel worker --bench-tools` offers.
func benchToolsOn(workspace string) (*tool.Registry, error) {
	reg, err := tool.Builtins(workspace)
	if err != nil {
		return nil, err
	}
	return reg, reg.Register(bench.NoopTool())
}
