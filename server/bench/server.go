package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	sdkclient "go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/devserver"
	kstack "github.com/keelrun/keel/server/internal/stack"
	"github.com/keelrun/keel/server/natsserver"
	"github.com/keelrun/keel/server/provider/scripted"
	"github.com/keelrun/keel/server/tool"
	"github.com/keelrun/keel/server/worker"
)

// Options configures Run.
type Options struct {
	// Runs is the number of keel runs per measurement (each of Steps model
	// steps; a latency run streams 60 deltas). At least 1.
	Runs int
	// Steps is the number of model steps per run of the step
	// measurements. At least 2: a step is the interval between two model
	// turns.
	Steps int
	// WorkerProcess, when set, starts the worker whose deltas cross NATS
	// in another process, against the server at address and namespace and
	// the NATS server at natsURL, with dir as scratch space; it returns
	// once the worker polls, with a function that stops it. The worker
	// must offer the scripts of dir as "scripted:NAME" (dir/NAME.json:
	// `keel worker --scripts dir`) and the tools of Tools. Nil runs that
	// worker in this process on connections of its own.
	WorkerProcess func(ctx context.Context, address, namespace, natsURL, dir string) (stop func(), err error)
	// Progress, when set, is told what each phase measures, naming the
	// server ("tuned" or "untuned").
	Progress func(server, phase string)
}

// Run measures keel's overheads on an in-memory Temporal server tuned for
// latency as `keel dev` runs it and then on a stock (untuned) one, sharing
// one embedded NATS server, each server started and stopped in turn
// (MeasureServer). `keel bench` prints what it returns.
func Run(ctx context.Context, opts Options) (*Report, error) {
	switch {
	case opts.Runs < 1:
		return nil, fmt.Errorf("bench: runs must be at least 1, got %d", opts.Runs)
	case opts.Steps < 2:
		return nil, fmt.Errorf("bench: steps must be at least 2, got %d", opts.Steps)
	}
	dir, err := os.MkdirTemp("", "keel-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	// The latency script goes to a file so a worker in another process
	// offers it too, as scripted:latency from its scripts directory.
	if err := os.WriteFile(filepath.Join(dir, latencyScriptName+scripted.Ext), []byte(LatencyScript), 0o600); err != nil {
		return nil, err
	}
	scripts, err := scripted.OpenDir(dir)
	if err != nil {
		return nil, err
	}
	defer scripts.Close()
	ns, err := natsserver.Start(natsserver.Options{Port: natsserver.RandomPort})
	if err != nil {
		return nil, fmt.Errorf("bench: start NATS: %w", err)
	}
	defer ns.Shutdown()

	rep := &Report{Runs: opts.Runs, Steps: opts.Steps, WorkerProcess: opts.WorkerProcess != nil, Load: loadAverage()}
	for _, tuned := range []bool{true, false} {
		b := &serverBench{opts: opts, tuned: tuned, natsURL: ns.ClientURL(), model: "scripted:" + latencyScriptName,
			dir: dir, scripts: scripts}
		figs, err := b.measure(ctx)
		if err != nil {
			return nil, fmt.Errorf("bench: %s server: %w", b.name(), err)
		}
		if tuned {
			rep.Tuned = figs
		} else {
			rep.Untuned = figs
		}
	}
	return rep, nil
}

// latencyScriptName names LatencyScript in the workers' scripts directory.
const latencyScriptName = "latency"

// Tools returns the built-in tools on workspace plus NoopTool: what a
// worker offers that plays Run's scripts (`keel worker --bench-tools`).
func Tools(workspace string) (*tool.Registry, error) {
	reg, err := tool.Builtins(workspace)
	if err != nil {
		return nil, err
	}
	return reg, reg.Register(NoopTool())
}

// minProbes is the fewest samples of a bare round trip: with few steps
// (one run of 3 steps) the baseline would otherwise rest on two samples.
const minProbes = 20

// serverBench measures everything on one server.
type serverBench struct {
	opts    Options
	tuned   bool
	natsURL string
	model   string // the latency script, scripted:latency
	dir     string // scratch space, and the workers' scripts directory
	scripts *scripted.Dir

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
	if b.opts.Progress != nil {
		b.opts.Progress(b.name(), fmt.Sprintf(format, args...))
	}
}

// measure starts the server, takes every figure, and stops it again.
func (b *serverBench) measure(ctx context.Context) (f ServerFigures, err error) {
	b.say("starting an in-memory Temporal server")
	b.srv, err = devserver.Start(ctx, devserver.Config{
		Port: devserver.AnyPort, DisableUI: true, Untuned: !b.tuned, Logger: zap.NewNop(), LogLevel: zapcore.ErrorLevel,
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

	if f.ModelStep, err = b.steps(ctx, "missing"); err != nil {
		return f, fmt.Errorf("model steps: %w", err)
	}
	if f.ToolStep, err = b.steps(ctx, "noop"); err != nil {
		return f, fmt.Errorf("tool steps: %w", err)
	}
	b.say("bare activity, query and update round trips")
	n := max(f.ModelStep.N, minProbes)
	if _, err := MeasureActivityRoundTrip(ctx, b.probe, "", 5); err != nil { // warm up
		return f, err
	}
	for _, p := range []struct {
		to      *Figure
		measure func(context.Context, sdkclient.Client, string, int) (Latencies, error)
	}{
		{&f.Bare, MeasureActivityRoundTrip},
		{&f.Query, MeasureQueryRoundTrip},
		{&f.Update, MeasureUpdateRoundTrip},
	} {
		lat, err := p.measure(ctx, b.probe, "", n)
		if err != nil {
			return f, err
		}
		*p.to = NewFigure(lat)
	}

	var lat EventLatency
	if lat, err = b.latencyNATS(ctx); err != nil {
		return f, fmt.Errorf("latency via NATS: %w", err)
	}
	f.DeltaNATS, f.Durable = NewFigure(lat.Deltas), NewFigure(lat.Durable)
	if lat, err = b.latencyMemory(ctx); err != nil {
		return f, fmt.Errorf("latency in-process: %w", err)
	}
	f.DeltaMemory = NewFigure(lat.Deltas)
	return f, nil
}

// steps measures model steps whose model calls toolName: "noop" makes each
// step a model turn and a tool activity, anything else a model turn only
// (a tool the run does not offer is answered by the workflow itself).
func (b *serverBench) steps(ctx context.Context, toolName string) (Figure, error) {
	runs := "runs"
	if b.opts.Runs == 1 {
		runs = "run"
	}
	b.say("%d %s of %d steps calling %q", b.opts.Runs, runs, b.opts.Steps, toolName)
	models := NewStampingModels(b.opts.Steps, toolName)
	w, err := b.startWorker(ctx, models, nil)
	if err != nil {
		return Figure{}, err
	}
	defer w.Stop()
	kc, err := client.Dial(ctx, client.Options{Temporal: b.user})
	if err != nil {
		return Figure{}, err
	}
	defer kc.Close()
	if _, err := MeasureSteps(ctx, kc, models, 1, b.opts.Steps); err != nil { // warm up
		return Figure{}, err
	}
	steps, err := MeasureSteps(ctx, kc, models, b.opts.Runs, b.opts.Steps)
	return NewFigure(steps), err
}

// latencyNATS measures deltas and durable events reaching a client on its
// own Temporal and NATS connections from a worker publishing to NATS: in
// this process on connections of its own, or in another process
// (Options.WorkerProcess).
func (b *serverBench) latencyNATS(ctx context.Context) (EventLatency, error) {
	if b.opts.WorkerProcess != nil {
		b.say("deltas via NATS from a worker in another process")
		stop, err := b.opts.WorkerProcess(ctx, b.srv.Address(), b.srv.Namespace(), b.natsURL, b.dir)
		if err != nil {
			return EventLatency{}, err
		}
		if stop == nil {
			return EventLatency{}, errors.New("the worker process gave no way to stop it")
		}
		defer stop()
	} else {
		b.say("deltas via NATS from a worker on its own connections")
		pub, err := live.DialNATS(b.natsURL, live.NATSOptions{})
		if err != nil {
			return EventLatency{}, err
		}
		defer pub.Close()
		w, err := b.startWorker(ctx, &worker.Models{Scripts: b.scripts}, pub)
		if err != nil {
			return EventLatency{}, err
		}
		defer w.Stop()
	}
	sub, err := live.DialNATS(b.natsURL, live.NATSOptions{})
	if err != nil {
		return EventLatency{}, err
	}
	defer sub.Close()
	return b.eventLatency(ctx, sub)
}

// latencyMemory measures the same with the in-process live channel.
func (b *serverBench) latencyMemory(ctx context.Context) (EventLatency, error) {
	b.say("deltas via the in-process channel")
	mem := live.NewMemory()
	defer mem.Close()
	w, err := b.startWorker(ctx, &worker.Models{Scripts: b.scripts}, mem)
	if err != nil {
		return EventLatency{}, err
	}
	defer w.Stop()
	return b.eventLatency(ctx, mem)
}

func (b *serverBench) eventLatency(ctx context.Context, ch live.Channel) (EventLatency, error) {
	kc, err := client.Dial(ctx, client.Options{Temporal: b.user, Live: ch})
	if err != nil {
		return EventLatency{}, err
	}
	defer kc.Close()
	// The warm-up run also waits until a worker in another process polls.
	if _, err := MeasureEventLatency(ctx, kc, b.model, 1); err != nil {
		return EventLatency{}, err
	}
	return MeasureEventLatency(ctx, kc, b.model, b.opts.Runs)
}

// startWorker starts a keel worker in this process with the no-op tool
// next to the built-ins, built by package stack on the workers' Temporal
// connection. Only one worker runs at a time: they all poll keel's task
// queue, and the measurements need theirs to answer.
func (b *serverBench) startWorker(ctx context.Context, models activities.ModelResolver, pub live.Publisher) (sdkworker.Worker, error) {
	tools, err := Tools(b.dir)
	if err != nil {
		return nil, err
	}
	st, err := kstack.Build(ctx, kstack.Config{Temporal: b.work, Live: pub, Worker: &worker.Options{
		Models: models, Tools: tools, StopTimeout: time.Second, Logger: zap.NewNop(),
	}})
	if err != nil {
		return nil, err
	}
	// The stack holds nothing but the worker: the connection and the live
	// channel are the bench's.
	return st.Worker, nil
}
