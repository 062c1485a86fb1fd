package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"

	"github.com/keelrun/keel/server/devserver"
	kstack "github.com/keelrun/keel/server/internal/stack"
	"github.com/keelrun/keel/server/natsserver"
	"github.com/keelrun/keel/server/provider/scripted"
	"github.com/keelrun/keel/server/store"
	"github.com/keelrun/keel/server/worker"
)

// ConcurrencyOptions configures MeasureConcurrency.
type ConcurrencyOptions struct {
	// Sessions lists the numbers of concurrent sessions to measure, each
	// on a server of its own. At least one, each at least 1.
	Sessions []int
	// CancelFraction of each measurement's sessions, and as many of the
	// baseline's workflows, are cancelled mid-stream, to time
	// cancellation under load. Optional: default 0, none. The figures of
	// a run (run time, history) are taken over the runs not cancelled.
	CancelFraction float64
	// KeelWorker, when set, starts the keel worker in another process
	// (`keel worker` with its defaults) and returns once it polls; its CPU
	// time is then measured apart from the server's. Nil runs it in this
	// process, on connections of its own.
	KeelWorker func(ctx context.Context, cfg WorkerConfig) (*Process, error)
	// BaselineWorker, when set, starts the bare baseline's worker
	// (RunBaselineWorker) in another process. Nil runs it in this process.
	BaselineWorker func(ctx context.Context, cfg WorkerConfig) (*Process, error)
	// Progress, when set, is told what each phase does.
	Progress func(sessions int, phase string)
	// Shaped adds a third measurement after keel's: as many sessions of
	// bare Temporal in keel's shape (a session workflow started by an
	// update-with-start, a child run per send, the tool call as an
	// activity), to tell what keel's design costs from what keel's code
	// adds. Optional.
	Shaped bool
	// Foreign adds a measurement after keel's of as many keel sessions
	// driven as a client in another language drives them, with Temporal's
	// own client alone: an update-with-start of "send", then the "outcome"
	// update (docs/foreign-clients.md); it is judged against the
	// update-with-start baseline, driven the same way. Optional.
	Foreign bool
	// Follow makes keel's Go client follow each run's events to its
	// terminal event (Run.Events, as `keel run` does) instead of waiting
	// for its outcome, to count what following costs (the events query
	// is billed). Optional.
	Follow bool
	// CPUProfile, when set, writes a CPU profile of this process (the
	// server, NATS and the benchmark's clients) over each phase's sessions,
	// to CPUProfile-<N>-<phase>.pprof (baseline, baseline-uws, keel, and
	// foreign and shaped when measured), for `go tool pprof`. Optional.
	CPUProfile string
	// RemoteCodec gives the clients that drive the update-with-start
	// baseline and keel through a foreign client a payload codec that
	// calls the content store's codec endpoint over HTTP (served on
	// loopback, as `keel dev` serves /codec), as a client in another
	// language configured by docs/foreign-clients.md does. Optional.
	RemoteCodec bool
	// Label names what was measured (a commit, "before"); optional:
	// default the VCS revision the binary was built from, if it recorded
	// one.
	Label string
}

// WorkerConfig is where a worker in another process finds the benchmark's
// server, live channel and content store.
type WorkerConfig struct {
	Address, Namespace string
	// NATSURL is the live channel's NATS server.
	NATSURL string
	// StoreURL is the content store (file:///DIR).
	StoreURL string
	// Workspace is the keel worker's workspace (its file tools' root).
	Workspace string
	// Dir is scratch space the worker may use.
	Dir string
	// Scripts is the worker's scripts directory (`keel worker --scripts`):
	// the measured runs' models are scripted:NAME from it.
	Scripts string
}

// Process is a worker running in another process.
type Process struct {
	// PID identifies it, for its CPU time (ProcessCPU).
	PID int
	// Stop stops it and waits for it to exit.
	Stop func()
}

// cancelAfterFirstDelta is how long a run to be cancelled streams, after
// its first delta reached the benchmark, before the cancel: well inside
// the first model turn.
const cancelAfterFirstDelta = time.Second

// baselineCancelAfter is when a baseline workflow to be cancelled is
// cancelled, after its start returned: inside its first activity. A
// foreign client's session is cancelled as long after its send returned.
const baselineCancelAfter = 2 * time.Second

// MeasureConcurrency measures, for each number of sessions N in
// opts.Sessions, N keel sessions each sending one prompt at once, whose
// scripted model streams (StreamScript), against N bare Temporal workflows
// at once running activities that stream as long without heartbeats,
// started once with a start call and once with an update-with-start
// waiting for the update's acceptance (the fair baseline of a send). Each
// phase gets a fresh embedded server as `keel dev` runs it (SQLite in a
// temporary directory, keel's tuning), an embedded NATS server that the
// keel worker publishes deltas to, and a content store in a directory:
// the two baselines, then keel (then keel through a foreign client and
// the shaped baseline, when asked). Besides latencies it
// counts, inside the server, the frontend's calls by method (and their
// time), heartbeats by activity type, persistence requests by operation
// and warnings, and reads every run's histories.
func MeasureConcurrency(ctx context.Context, opts ConcurrencyOptions) (*ConcurrencyReport, error) {
	if len(opts.Sessions) == 0 {
		return nil, errors.New("bench: no session counts to measure")
	}
	for _, n := range opts.Sessions {
		if n < 1 {
			return nil, fmt.Errorf("bench: sessions must be at least 1, got %d", n)
		}
	}
	if opts.CancelFraction < 0 || opts.CancelFraction >= 1 {
		return nil, fmt.Errorf("bench: cancel fraction must be in [0, 1), got %v", opts.CancelFraction)
	}
	rep := &ConcurrencyReport{
		ModelTime: ModelTime(), Turns: StreamTurns(), CancelFraction: opts.CancelFraction,
		WorkerProcess: opts.KeelWorker != nil, RemoteCodec: opts.RemoteCodec, Revision: cmpOr(opts.Label, revision()), Load: loadAverage(),
	}
	for _, n := range opts.Sessions {
		p, err := measurePoint(ctx, opts, n)
		if err != nil {
			return rep, fmt.Errorf("bench: %d sessions: %w", n, err)
		}
		rep.Points = append(rep.Points, p)
	}
	return rep, nil
}

// cancels is how many of n sessions a measurement cancels.
func cancels(n int, fraction float64) int {
	return int(float64(n)*fraction + 0.5)
}

// cancelled reports whether session i of n is one of the c cancelled,
// spread evenly over the sessions.
func cancelled(i, n, c int) bool {
	return c > 0 && (i+1)*c/n != i*c/n
}

// stack is what one measurement runs on.
type stack struct {
	opts     ConcurrencyOptions
	n        int
	dir      string
	srv      *devserver.Server
	counters *ServerCounters
	natsURL  string
	storeURL string
	codec    *store.Codec
	// tc is the benchmark's own Temporal connection, for its clients;
	// clientRPCs counts its calls.
	tc         sdkclient.Client
	clientRPCs *ClientCounter
	// plain is a connection with Temporal's default data converter, as a
	// client without keel's codec has, for the update-with-start baseline
	// and the foreign-client phase; clientRPCs counts its calls too.
	plain sdkclient.Client
}

func (s *stack) say(format string, args ...any) {
	if s.opts.Progress != nil {
		s.opts.Progress(s.n, fmt.Sprintf(format, args...))
	}
}

func (s *stack) workerConfig() WorkerConfig {
	return WorkerConfig{Address: s.srv.Address(), Namespace: s.srv.Namespace(), NATSURL: s.natsURL,
		StoreURL: s.storeURL, Workspace: filepath.Join(s.dir, "workspace"), Dir: s.dir,
		Scripts: filepath.Join(s.dir, "scripts")}
}

func measurePoint(ctx context.Context, opts ConcurrencyOptions, n int) (p ConcurrencyPoint, err error) {
	p.Sessions = n
	// Each phase runs on a server of its own, started the same way: a
	// phase on a server that already holds the earlier phases' executions
	// was up to 15% slower at 500 sessions, whichever phase it was.
	phase := func(name string, measure func(s *stack) (PhaseFigures, error)) (PhaseFigures, error) {
		s, closeStack, err := openStack(ctx, opts, n)
		if err != nil {
			return PhaseFigures{}, err
		}
		defer closeStack()
		f, err := measure(s)
		if err != nil {
			return f, fmt.Errorf("%s: %w", name, err)
		}
		return f, nil
	}
	if p.Baseline, err = phase("baseline", func(s *stack) (PhaseFigures, error) {
		return s.bare(ctx, "baseline", []string{"Workflow"}, s.baselineSession)
	}); err != nil {
		return p, err
	}
	if p.BaselineUWS, err = phase("update-with-start baseline", func(s *stack) (PhaseFigures, error) {
		return s.bare(ctx, "baseline-uws", []string{"Workflow"}, s.updateWithStartSession)
	}); err != nil {
		return p, err
	}
	if p.Keel, err = phase("keel", func(s *stack) (PhaseFigures, error) { return s.keel(ctx, false) }); err != nil {
		return p, err
	}
	if opts.Foreign {
		f, err := phase("keel through a foreign client", func(s *stack) (PhaseFigures, error) { return s.keel(ctx, true) })
		if err != nil {
			return p, err
		}
		p.Foreign = &f
	}
	if opts.Shaped {
		f, err := phase("shaped baseline", func(s *stack) (PhaseFigures, error) {
			return s.bare(ctx, "shaped", []string{"Session", "Run"}, s.shapedSession)
		})
		if err != nil {
			return p, err
		}
		p.Shaped = &f
	}
	return p, nil
}

// openStack starts what one phase runs on: a fresh embedded server as
// `keel dev` runs it (SQLite in a temporary directory, keel's tuning), an
// embedded NATS server, a content store and the benchmark's clients.
func openStack(ctx context.Context, opts ConcurrencyOptions, n int) (s *stack, closeAll func(), err error) {
	var closers []func()
	closeAll = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	defer func() {
		if err != nil {
			closeAll()
		}
	}()
	dir, err := os.MkdirTemp("", "keel-bench-concurrency-")
	if err != nil {
		return nil, nil, err
	}
	closers = append(closers, func() { _ = os.RemoveAll(dir) })
	s = &stack{opts: opts, n: n, dir: dir, counters: &ServerCounters{}}
	s.say("starting the server (SQLite in %s), NATS and the content store", dir)
	s.srv, err = devserver.Start(ctx, devserver.Config{
		DataDir: filepath.Join(dir, "data"), Port: devserver.AnyPort, DisableUI: true,
		Logger: s.counters.Logger(nil), LogLevel: zapcore.WarnLevel,
		FrontendInterceptors: []grpc.UnaryServerInterceptor{s.counters.Interceptor()},
		MetricsHandler:       s.counters.MetricsHandler(),
	})
	if err != nil {
		return nil, nil, err
	}
	closers = append(closers, func() { _ = s.srv.Stop() })
	ns, err := natsserver.Start(natsserver.Options{Port: natsserver.RandomPort})
	if err != nil {
		return nil, nil, fmt.Errorf("start NATS: %w", err)
	}
	closers = append(closers, ns.Shutdown)
	s.natsURL = ns.ClientURL()
	if err := os.MkdirAll(filepath.Join(dir, "scripts"), 0o700); err != nil { // workerConfig's
		return nil, nil, err
	}
	storeDir := filepath.Join(dir, "store")
	if err := os.MkdirAll(storeDir, 0o700); err != nil {
		return nil, nil, err
	}
	s.storeURL = "file://" + storeDir
	st, err := store.Open(ctx, s.storeURL)
	if err != nil {
		return nil, nil, err
	}
	closers = append(closers, func() { _ = st.Close() })
	s.codec = store.NewCodec(st, store.CodecOptions{})
	s.clientRPCs = &ClientCounter{}
	counted := sdkclient.ConnectionOptions{DialOptions: []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(ClientInterceptor(s.clientRPCs)),
	}}
	s.tc, err = s.srv.Dial(ctx, sdkclient.Options{DataConverter: store.NewDataConverter(s.codec), ConnectionOptions: counted})
	if err != nil {
		return nil, nil, err
	}
	closers = append(closers, s.tc.Close)
	plain := sdkclient.Options{ConnectionOptions: counted}
	if opts.RemoteCodec {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, nil, err
		}
		hs := &http.Server{Handler: http.StripPrefix("/codec", s.codec.Handler(store.HandlerOptions{})), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = hs.Serve(l) }()
		closers = append(closers, func() { _ = hs.Close() })
		plain.DataConverter = converter.NewCodecDataConverter(converter.GetDefaultDataConverter(),
			converter.NewRemotePayloadCodec(converter.RemotePayloadCodecOptions{Endpoint: "http://" + l.Addr().String() + "/codec"}))
	}
	if s.plain, err = s.srv.Dial(ctx, plain); err != nil {
		return nil, nil, err
	}
	closers = append(closers, s.plain.Close)
	if err := worker.EnsureSearchAttributes(ctx, s.tc, s.srv.Namespace()); err != nil {
		return nil, nil, err
	}
	return s, closeAll, nil
}

// startInProcessKeelWorker runs a keel worker in this process as `keel
// dev` builds its own (package stack): default options, the workspace's
// file tools, deltas to NATS, large values to the content store.
func (s *stack) startInProcessKeelWorker(ctx context.Context, cfg WorkerConfig) (stop func(), err error) {
	scripts, err := scripted.OpenDir(cfg.Scripts)
	if err != nil {
		return nil, err
	}
	models := worker.DefaultModels()
	models.Scripts = scripts
	st, err := kstack.Build(ctx, kstack.Config{Server: s.srv, Store: kstack.StoreConfig{Codec: s.codec}, NATS: s.natsURL,
		Worker: &worker.Options{Workspace: cfg.Workspace, Logger: zap.NewNop(), Models: models}})
	if err != nil {
		_ = scripts.Close()
		return nil, err
	}
	return func() { _ = st.Stop(); _ = scripts.Close() }, nil
}

// RunBaselineWorker runs the bare baseline's worker (NewBaselineWorker) on
// a connection of its own to the server at address until ctx ends; ready
// is called once it polls. `keel-bench concurrency` runs it in a child
// process.
func RunBaselineWorker(ctx context.Context, address, namespace string, ready func()) error {
	c, err := sdkclient.DialContext(ctx, sdkclient.Options{HostPort: address, Namespace: namespace})
	if err != nil {
		return err
	}
	defer c.Close()
	w := NewBaselineWorker(c)
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Stop()
	ready()
	<-ctx.Done()
	return nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// revision is the VCS revision this binary was built from, with "+dirty"
// for uncommitted changes; "" if the build did not record it (tests).
func revision() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if len(rev) > 7 {
		rev = rev[:7]
	}
	if rev == "" {
		return ""
	}
	return rev + dirty
}
