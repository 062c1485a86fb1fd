package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	sdkclient "go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.uber.org/zap"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/connect"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/logging"
	"github.com/keelrun/keel/server/telemetry"
)

// Connection defaults: Temporal's own (so `temporal` and keel find the same
// server) and NATS's.
const (
	defaultAddress   = connect.DefaultHostPort
	defaultNamespace = connect.DefaultNamespace
	defaultNATS      = "nats://127.0.0.1:4222"
	// dialTimeout bounds connecting to Temporal, so a missing server is a
	// quick, clear error rather than a hang.
	dialTimeout = 10 * time.Second
	// natsDialTimeout is short: the live channel is optional.
	natsDialTimeout = 2 * time.Second
	// traceFlushTimeout bounds exporting a command's spans as it exits, so
	// an unreachable collector delays the exit, never hangs it.
	traceFlushTimeout = 5 * time.Second
)

// connFlags are the flags that say where Temporal (and NATS) are and how
// to reach them.
type connFlags struct {
	temporalFlags
	nats     string
	natsAuth natsFlags
	withNATS bool
	store    storeFlags
	// logger receives the Temporal client's records (keel serve's);
	// nil: errors only, on stderr.
	logger *zap.Logger
}

func (c *connFlags) register(fs *flagSet, withNATS bool) {
	c.temporalFlags.register(fs)
	if withNATS {
		c.withNATS = true
		fs.StringVar(&c.nats, "nats", defaultNATSURL(), "NATS `URL` of the live channel (streamed text); \"\" disables it (default $"+envNATSURL+", else "+defaultNATS+")")
		c.natsAuth.register(fs)
	}
	c.store.register(fs, fs.Name() == "keel worker")
}

// conn is a connected keel client and its live channel, if any.
type conn struct {
	*client.Client
	// temporal is the Temporal client under Client, dialled with the
	// tracing interceptor when tel is set.
	temporal sdkclient.Client
	// live is nil when the live channel is off or unreachable.
	live live.Channel
	// closeStore releases the content store, if the command opened one.
	closeStore func()
	// tel is the telemetry whose spans the client records; nil unless
	// the OTEL_EXPORTER_OTLP_* variables ask for traces.
	tel *telemetry.Telemetry
}

// close releases the client and the live channel, and exports the spans
// the command recorded.
func (c *conn) close() {
	c.Client.Close()
	c.temporal.Close()
	c.closeStore()
	if c.live != nil {
		_ = c.live.Close()
	}
	c.flushTraces()
}

// flushTraces exports the spans the command recorded, if it traces.
func (c *conn) flushTraces() {
	if c.tel != nil {
		ctx, cancel := context.WithTimeout(context.Background(), traceFlushTimeout)
		// A failed export is reported by OpenTelemetry's error handler
		// (on stderr); the command's own result stands.
		_ = c.tel.Shutdown(ctx)
		cancel()
	}
}

// dial connects a keel client. With NATS configured but unreachable it
// warns once on stderr and goes on with durable events only: the run's
// facts are all in Temporal, the live channel only adds streamed text.
// The connection options are resolved once, here; the one Temporal client
// is dialled with them and handed to the keel client.
func (c *connFlags) dial(ctx context.Context, stderr io.Writer, defaults api.RunConfig) (*conn, error) {
	out := &conn{}
	co, err := c.resolve()
	if err != nil {
		return nil, err
	}
	lctx, cancelLearn := context.WithTimeout(ctx, dialTimeout)
	err = c.store.learnEndpoint(lctx, co.Options, c.temporalLogger(stderr))
	cancelLearn()
	if err != nil {
		return nil, withServerHint(err)
	}
	cs, err := c.store.open(ctx)
	if err != nil {
		return nil, err
	}
	out.closeStore = cs.close
	var natsErr error
	if c.withNATS && c.nats != "" {
		o, err := c.liveOptions(cs, nats.Timeout(natsDialTimeout))
		if err != nil {
			cs.close()
			return nil, err
		}
		if n, err := live.DialNATS(c.nats, o); err != nil {
			natsErr = err
		} else {
			out.live = n
		}
	}
	fail := func(err error) (*conn, error) {
		if out.temporal != nil {
			out.temporal.Close()
		}
		out.flushTraces()
		if out.live != nil {
			_ = out.live.Close()
		}
		cs.close()
		return nil, withServerHint(err)
	}
	sdk := sdkclient.Options{Logger: c.temporalLogger(stderr), DataConverter: cs.dc}
	// With the OTEL_EXPORTER_OTLP_* variables, a prompt the command sends
	// starts the trace that the session, its run, turns and tools join.
	if telemetry.OTLPRequested() {
		if out.tel, err = telemetry.Start(ctx, telemetry.Options{}); err != nil {
			return fail(err)
		}
		sdk = out.tel.ClientOptions(sdk)
	}
	if out.temporal, err = co.Dial(ctx, sdk, dialTimeout); err != nil {
		return fail(fmt.Errorf("keel: %w", err))
	}
	out.Client, err = client.Dial(ctx, client.Options{Temporal: out.temporal, Namespace: co.Namespace,
		Live: out.live, Config: defaults, DataConverter: cs.dc, Attachments: cs.attach})
	if err != nil {
		return fail(err)
	}
	if natsErr != nil {
		// Said only now: without Temporal, the missing NATS is beside the point.
		fmt.Fprintf(stderr, "keel: warning: live channel unavailable (%v); showing durable events only, without streamed text\n", natsErr)
		if hint := natsHint(natsErr); hint != "" {
			fmt.Fprintf(stderr, "  %s\n", hint)
		}
	}
	return out, nil
}

// temporalLogger is the Temporal client's logger: c.logger, else errors
// only, on stderr.
func (c *connFlags) temporalLogger(stderr io.Writer) tlog.Logger {
	if c.logger != nil {
		return logging.Temporal(c.logger)
	}
	return tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError})))
}

// fail prints err for command name with a hint for the errors users hit
// most, and returns exitFailed.
func fail(stderr io.Writer, name string, err error) int {
	// Wrapped keel errors each say "keel: "; once, in front, is enough.
	msg := strings.ReplaceAll(strings.TrimPrefix(err.Error(), "keel: "), ": keel: ", ": ")
	fmt.Fprintf(stderr, "keel %s: %s\n", name, sanitize(msg))
	if hint := hintFor(name, err); hint != "" {
		fmt.Fprintf(stderr, "  %s\n", hint)
	}
	return exitFailed
}

func hintFor(name string, err error) string {
	var de *connect.DialError
	switch {
	case errors.As(err, &de) && de.Cause != nil:
		return "" // the message says what to do
	case errors.Is(err, keel.ErrRunActive):
		return "wait for it, cancel it with `keel cancel SESSION`, or queue this prompt with `keel send --queue`"
	case errors.Is(err, keel.ErrNotFound):
		return "check the session ID (`keel run` prints it), --namespace and --address"
	case errors.Is(err, keel.ErrNotAccepting) && (name == "run" || name == "send"):
		return "this session is closed; start a new one (omit --session)"
	case errors.Is(err, keel.ErrNotAccepting):
		return "the run has ended and takes no more commands; `keel state SESSION` shows what the session is doing"
	case errors.Is(err, client.ErrNoContentStore):
		return "attachments are stored in the workers' content store: run `keel dev` on this machine, or name the store (--store) or its codec endpoint (--codec-endpoint)"
	case errors.Is(err, keel.ErrRuntimeShutdown):
		return "the runtime was shut down; no new runs start"
	case errors.Is(err, context.DeadlineExceeded):
		return "timed out: is the server reachable and a worker (`keel worker` or `keel dev`) running?"
	}
	return ""
}

// targetRun returns run number n of the session, or with n == 0 its
// active run; no active run is an error that says so.
func targetRun(ctx context.Context, sess *client.Session, n int) (*client.Run, error) {
	if n > 0 {
		return sess.Run(n), nil
	}
	run, err := sess.ActiveRun(ctx)
	if err != nil {
		return nil, err
	}
	if run == nil {
		return nil, keel.Errorf(keel.CodeNotAccepting, "session %s has no active run", sess.ID())
	}
	return run, nil
}

// runTarget is what the commands that act on one run of a session share:
// where the server is, and which run: --run N, or the session's active run.
type runTarget struct {
	conn connFlags
	n    int
}

// register adds the connection flags and --run; verb says what the command
// does to the run ("steer", "cancel").
func (t *runTarget) register(fs *flagSet, verb string) {
	t.conn.register(fs, false)
	fs.IntVar(&t.n, "run", 0, verb+" run number `N` instead of the active run")
}

// check validates the SESSION argument and --run. On a bad one it prints
// the usage error and returns its exit status with ok false.
func (t *runTarget) check(fs *flagSet, stderr io.Writer, session string) (code int, ok bool) {
	if err := keel.ValidateSessionID(session); err != nil {
		return fs.usageError(stderr, "%v", err), false
	}
	if t.n < 0 {
		return fs.usageError(stderr, "--run must be a run number from 1, got %d", t.n), false
	}
	return 0, true
}

// dial connects to the server, without the live channel: these commands
// only read state and send requests.
func (t *runTarget) dial(ctx context.Context, stderr io.Writer) (*conn, error) {
	return t.conn.dial(ctx, stderr, api.RunConfig{})
}

// open dials and finds the targeted run of session; the caller closes the
// connection when err is nil.
func (t *runTarget) open(ctx context.Context, stderr io.Writer, session string) (*conn, *client.Run, error) {
	kc, err := t.dial(ctx, stderr)
	if err != nil {
		return nil, nil, err
	}
	run, err := targetRun(ctx, kc.Session(session), t.n)
	if err != nil {
		kc.close()
		return nil, nil, err
	}
	return kc, run, nil
}
