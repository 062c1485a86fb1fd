//go:build !nodev

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdkworker "go.temporal.io/sdk/worker"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"

	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/crypt"
	"github.com/keelrun/keel/internal/httpguard"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/logging"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/gateway"
	"github.com/keelrun/keel/server/internal/stack"
	"github.com/keelrun/keel/server/natsserver"
	"github.com/keelrun/keel/server/provider/scripted"
	"github.com/keelrun/keel/server/store"
	"github.com/keelrun/keel/server/telemetry"
	"github.com/keelrun/keel/server/worker"
)

const devDesc = `Runs a complete local keel in one process: a Temporal server whose state
lives in SQLite under --data-dir, or in PostgreSQL with --postgres (so
sessions survive a restart), the
Temporal Web UI, an embedded NATS server for streamed text, a worker
with the built-in tools confined to --workspace, and keel's HTTP API
(docs/gateway.md) on 127.0.0.1 at --http-port. It prints the addresses and
stays up until Ctrl-C, then stops the worker (letting running activities
finish briefly), NATS and the server; a second Ctrl-C exits at once. With
--demo it also sends the demo prompt to a new session and renders the run
like "keel run". Port 0 picks a free port.`

// demoPrompt is what `keel dev --demo` sends; the demo script ignores it,
// but it is what a person would ask.
const demoPrompt = "Give me a tour of the workspace."

// devConfig is how to run the local stack.
type devConfig struct {
	// dataDir holds the SQLite database; "" keeps it in memory (tests).
	dataDir string
	// postgres keeps the server's data in PostgreSQL instead; nil: SQLite.
	postgres *devserver.Postgres
	// Ports; 0 picks a free one.
	port, uiPort, natsPort, httpPort int
	// store is the content store's URL; "" puts it under dataDir (or in
	// memory without one).
	store string
	noUI  bool
	// workspace is the file tools' root, created (and seeded with the
	// demo's welcome.txt) if missing.
	workspace string
	// logger receives the server's, the worker's and the HTTP API's logs;
	// the server's from logLevel up. Default: warnings on stderr.
	logger   *zap.Logger
	logLevel zapcore.Level
	// gateway configures the HTTP API; its Logger defaults to logger.
	gateway gateway.Options
	// tuning sets the worker's capacity and heartbeats; nil keeps
	// worker.Options' defaults.
	tuning *stack.Tuning
	// crypt names the encryption key file ("" encrypts nothing) and the
	// codec endpoint's bearer token ("" requires none).
	crypt devCryptFlags
	// telemetry gives the worker and the clients their metrics handler
	// and tracing; nil: none.
	telemetry *telemetry.Telemetry
	// config is the worker's keel.yaml; nil or an empty flag: none.
	config *configFlag
	// allowedHosts are the host names every HTTP listener (API, codec
	// endpoint, Web UI) answers to besides its own address and localhost.
	allowedHosts []string
	// scripts is the scripts directory, which must exist (scripted:NAME
	// plays NAME.json in it); "": none. allowModels, when not empty, is
	// all the worker offers (--allow-model).
	scripts     string
	allowModels []string
}

// devStack is a running local stack: the embedded servers this command
// starts, and keel's parts on them, built by package stack.
type devStack struct {
	server   *devserver.Server
	st       *stack.Stack
	store    *stack.ContentStore
	keys     *crypt.Keyring // nil: no encryption
	keyFile  string
	http     *http.Server
	httpL    net.Listener
	codecURL string
	// codecToken is the bearer token the codec endpoint requires, if any.
	codecToken string
	nats       *natsserver.Server
	natsLogin  devNATSLogin
	workspace  string
	scripts    string
	tel        *telemetry.Telemetry
	// temporal, dc and worker are st's client, data converter and worker.
	temporal sdkclient.Client
	dc       converter.DataConverter
	worker   sdkworker.Worker

	// allowedHosts are --allowed-host's names.
	allowedHosts []string
	// closers release what the worker held, once it stopped.
	closers []func() error
}

func cmdDev(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("dev", "keel dev [flags]", devDesc)
	dataDir := fs.String("data-dir", ".keel", "`DIR` for the server's SQLite database and the default workspace")
	postgresURL := fs.String("postgres", "", "PostgreSQL `URL` (postgres://USER:PASSWORD@HOST:PORT/DATABASE?sslmode=disable) for the server's data instead of SQLite in DATA_DIR")
	port := fs.Int("port", devserver.DefaultPort, "Temporal gRPC `port`")
	uiPort := fs.Int("ui-port", devserver.DefaultUIPort, "Web UI `port`")
	natsPort := fs.Int("nats-port", natsserver.DefaultPort, "NATS `port`")
	httpPort := fs.Int("http-port", defaultHTTPPort, "HTTP `port` of keel's endpoints (the HTTP API and the content store's codec endpoint)")
	var gw gatewayFlags
	gw.register(fs)
	storeURL := fs.String("store", os.Getenv(envStore), "content store `URL` for large values (default DATA_DIR/store)")
	noUI := fs.Bool("no-ui", false, "run without the Web UI")
	workspace := fs.String("workspace", "", "`DIR` the file tools may read and write (default DATA_DIR/workspace)")
	demo := fs.Bool("demo", false, "send the demo prompt and render its run once the stack is up")
	var logs logFlags
	logs.register(fs, "to DATA_DIR/dev.log (by the server, the worker and the HTTP API)", "")
	var tuning stack.Tuning
	tuning.Register(fs.FlagSet)
	var cryptFlags devCryptFlags
	cryptFlags.register(fs)
	var confFlag configFlag
	confFlag.register(fs)
	var modelOpts modelFlags
	modelOpts.register(fs, " (default: keel.yaml's scripts, else DATA_DIR/scripts, created if missing)")
	var telFlags telemetryFlags
	telFlags.register(fs, defaultDevMetricsAddress)
	var hosts hostsFlag
	hosts.register(fs, "keel dev's HTTP listeners (the HTTP API and web page, the codec endpoint, the Web UI, metrics) should")
	telFlags.hosts = &hosts
	if _, code, ok := fs.parse(args, stdout, stderr, 0, 0); !ok {
		return code
	}
	if err := confFlag.load(); err != nil {
		return fail(stderr, "dev", err)
	}
	if err := modelOpts.check(); err != nil {
		return fs.usageError(stderr, "%v", err)
	}
	if err := tuning.Check(); err != nil {
		return fs.usageError(stderr, "%v", err)
	}
	for name, p := range map[string]int{"--port": *port, "--ui-port": *uiPort, "--nats-port": *natsPort, "--http-port": *httpPort} {
		if p < 0 || p > 65535 {
			return fs.usageError(stderr, "%s %d is not a port (0 picks a free one)", name, p)
		}
	}
	if *dataDir == "" {
		return fs.usageError(stderr, "--data-dir must name a directory")
	}
	var postgres *devserver.Postgres
	if *postgresURL != "" {
		var err error
		if postgres, err = devserver.ParsePostgresURL(*postgresURL); err != nil {
			return fs.usageError(stderr, "--postgres: %v", err)
		}
	}
	logOpts, err := logs.options(nil)
	if err != nil {
		return fs.usageError(stderr, "%v", err)
	}
	if *workspace = confFlag.workspace(fs, *workspace); *workspace == "" {
		*workspace = filepath.Join(*dataDir, "workspace")
	}
	// The server and the worker log to a file: their warnings (a dial
	// retried during shutdown, an activity's error that the run reports
	// anyway) would bury the demo and the addresses in the terminal.
	if err := os.MkdirAll(*dataDir, 0o700); err != nil {
		return fail(stderr, "dev", err)
	}
	// --scripts and keel.yaml's scripts must exist; the default is made.
	scriptsDir := modelOpts.scriptsDir(fs, &confFlag, "")
	if scriptsDir == "" {
		scriptsDir = filepath.Join(*dataDir, "scripts")
		if err := os.MkdirAll(scriptsDir, 0o755); err != nil {
			return fail(stderr, "dev", err)
		}
	}
	logPath := filepath.Join(*dataDir, "dev.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fail(stderr, "dev", err)
	}
	defer logFile.Close()

	logOpts.Output = logFile
	devLogger, err := logging.New(logOpts)
	if err != nil {
		return fail(stderr, "dev", err)
	}
	defer func() { _ = devLogger.Sync() }()
	gwOpts, err := gw.options(devLogger)
	if err != nil {
		return fail(stderr, "dev", err)
	}

	tel, err := telFlags.start(ctx, stderr, "dev")
	if err != nil {
		return fail(stderr, "dev", err)
	}
	defer tel.Shutdown(context.Background())
	fmt.Fprintln(stdout, "keel dev: starting Temporal, the Web UI, NATS and a worker…")
	stack, err := startDevStack(ctx, devConfig{
		dataDir: *dataDir, postgres: postgres, port: *port, uiPort: *uiPort, natsPort: *natsPort, httpPort: *httpPort, noUI: *noUI,
		store:     *storeURL,
		workspace: *workspace,
		logger:    devLogger,
		logLevel:  logOpts.Level,
		gateway:   gwOpts,
		tuning:    &tuning,
		crypt:     cryptFlags,
		telemetry: tel,
		config:    &confFlag,

		allowedHosts: hosts.items,
		scripts:      scriptsDir,
		allowModels:  modelOpts.allow,
	})
	if err != nil {
		return fail(stderr, "dev", err)
	}
	stack.printWelcome(stdout, *dataDir, logPath)
	if *demo && ctx.Err() == nil {
		stack.runDemo(ctx, stdout, stderr)
	}
	if ctx.Err() == nil {
		fmt.Fprintln(stdout, "\nEverything stays up until Ctrl-C.")
	}
	<-ctx.Done()
	fmt.Fprintln(stdout, "\nkeel dev: shutting down (Ctrl-C again to exit at once)…")
	if err := stack.stop(); err != nil {
		fmt.Fprintf(stderr, "keel dev: shutdown: %s\n", sanitize(err.Error()))
		return exitFailed
	}
	fmt.Fprintln(stdout, "keel dev: stopped.")
	return exitOK
}

// startDevStack starts the server, NATS and a worker publishing deltas to
// NATS. On error, whatever started is stopped again.
func startDevStack(ctx context.Context, cfg devConfig) (s *devStack, err error) {
	s = &devStack{}
	defer func() {
		if err != nil {
			_ = s.stop()
			s = nil
		}
	}()
	if s.workspace, err = prepareWorkspace(cfg.workspace); err != nil {
		return s, err
	}
	logger, level := cfg.logger, cfg.logLevel
	if logger == nil {
		logger, level = logging.Default(), zapcore.WarnLevel
	}
	enc, keys, err := loadEncryption(cfg.crypt.keyFile, cfg.crypt.allowPlaintext)
	if err != nil {
		return s, err
	}
	s.keys, s.keyFile = keys, cfg.crypt.keyFile
	storeURL, err := devStoreURL(cfg)
	if err != nil {
		return s, err
	}
	// Opened before any server starts: a store that cannot be written
	// fails at once.
	if s.store, err = stack.OpenStore(ctx, stack.StoreConfig{URL: storeURL, Check: true, Encryption: enc}); err != nil {
		return s, err
	}
	s.codecToken, s.allowedHosts = cfg.crypt.codecToken, cfg.allowedHosts
	httpAddr := net.JoinHostPort(devserver.DefaultIP, strconv.Itoa(cfg.httpPort))
	if err := store.CheckListen(httpAddr, s.codecToken != ""); err != nil {
		return s, err
	}
	if err := s.codecOptions().Validate(); err != nil {
		return s, err
	}
	httpListener, err := net.Listen("tcp", httpAddr)
	if err != nil {
		return s, fmt.Errorf("keel dev: HTTP endpoints: %w\nIs another `keel dev` running? Choose another port with --http-port (0 picks a free one)", err)
	}
	s.httpL = httpListener
	s.codecURL = "http://" + httpListener.Addr().String() + "/codec"
	serverDir := cfg.dataDir
	if cfg.postgres != nil {
		serverDir = ""
	}
	s.server, err = devserver.Start(ctx, devserver.Config{
		DataDir:         serverDir,
		Postgres:        cfg.postgres,
		Port:            anyPortIfZero(cfg.port, devserver.AnyPort),
		UIPort:          anyPortIfZero(cfg.uiPort, devserver.AnyPort),
		DisableUI:       cfg.noUI,
		UICodecEndpoint: s.codecURL,
		UIAllowedHosts:  cfg.allowedHosts,
		Logger:          logger,
		LogLevel:        level,
		// Empty in keel; see devFrontendInterceptors.
		FrontendInterceptors: devFrontendInterceptors,
	})
	if errors.Is(err, devserver.ErrPortInUse) {
		return s, fmt.Errorf("%w\nIs another `keel dev` or Temporal dev server running? Stop it, or choose other ports (--port, --ui-port; 0 picks a free one)", err)
	}
	if err != nil {
		return s, err
	}
	if err := s.startNATS(cfg); err != nil {
		return s, err
	}
	s.tel = cfg.telemetry
	models, err := newModels(cfg.scripts, cfg.allowModels)
	if err != nil {
		return s, err
	}
	s.scripts = cfg.scripts
	if dir, ok := models.Scripts.(io.Closer); ok {
		s.closers = append(s.closers, dir.Close)
	}
	wopts := worker.Options{Workspace: s.workspace, Logger: logger, Models: models}
	if cfg.tuning != nil {
		cfg.tuning.Apply(&wopts)
	}
	if cfg.config != nil {
		if err := cfg.config.apply(&wopts); err != nil {
			return s, err
		}
	}
	gw := cfg.gateway
	if gw.Logger == nil {
		gw.Logger = logger
	}
	gw.AllowedHosts = cfg.allowedHosts
	gw.Agents = cfg.config.gatewayAgents()
	gw.WebUIURL = s.uiURL() // the web page links runs to it
	s.st, err = stack.Build(ctx, stack.Config{
		Server:           s.server,
		Store:            stack.StoreConfig{Codec: s.store.Codec},
		Telemetry:        s.tel,
		NATS:             s.nats.ClientURL(),
		NATSOptions:      s.liveOptions(),
		Worker:           &wopts,
		SearchAttributes: true,
		Gateway:          &gw,
	})
	if err != nil {
		return s, err
	}
	s.temporal, s.dc, s.worker = s.st.Temporal, s.st.Store.DataConverter, s.st.Worker
	if err := recordCodecEndpoint(ctx, s.temporal, s.server.Namespace(), s.codecURL); err != nil {
		return s, err
	}
	s.serveHTTP()
	return s, nil
}

// anyPortIfZero maps the CLI's "0 picks a free port" to a package's own
// constant for it (0 means the default port there).
func anyPortIfZero(port, anyPort int) int {
	if port == 0 {
		return anyPort
	}
	return port
}

// prepareWorkspace creates the workspace directory and seeds it with the
// file the demo reads, unless it is there already (it is the user's now).
func prepareWorkspace(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("workspace: %w", err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return "", fmt.Errorf("workspace: %w", err)
	}
	welcome := filepath.Join(abs, "welcome.txt")
	if _, err := os.Lstat(welcome); errors.Is(err, os.ErrNotExist) {
		if err := os.WriteFile(welcome, []byte(scripted.DemoWelcome), 0o644); err != nil {
			return "", fmt.Errorf("workspace: %w", err)
		}
	}
	return abs, nil
}

// stop stops what started, in dependency order: the worker (which uses
// the other two), NATS, the server. It is safe on a partly started stack.
func (s *devStack) stop() error {
	var errs []error
	if s.st != nil {
		// The gateway first: its event streams end, so the HTTP server
		// closes at once; then the worker and what it used.
		errs = append(errs, s.st.Stop())
	}
	for _, c := range s.closers {
		errs = append(errs, c())
	}
	if s.nats != nil {
		s.nats.Shutdown()
		s.natsLogin.unregister()
	}
	if s.http != nil {
		errs = append(errs, s.http.Close())
	} else if s.httpL != nil {
		errs = append(errs, s.httpL.Close())
	}
	if s.server != nil {
		errs = append(errs, s.server.Stop())
	}
	errs = append(errs, s.store.Close())
	return errors.Join(errs...)
}

// uiURL is the Web UI's URL, "" without the UI.
func (s *devStack) uiURL() string {
	if s.server.UIAddress() == "" {
		return ""
	}
	return "http://" + s.server.UIAddress()
}

// addressFlag and natsFlag are the flags another keel command needs to
// reach this stack, empty on the default ports.
func (s *devStack) addressFlag() string {
	if s.server.Address() == fmt.Sprintf("%s:%d", devserver.DefaultIP, devserver.DefaultPort) {
		return ""
	}
	return " --address " + s.server.Address()
}

func (s *devStack) natsFlag() string {
	if s.nats.ClientURL() == defaultNATSURL() {
		return ""
	}
	return " --nats " + s.nats.ClientURL()
}

func (s *devStack) printWelcome(w io.Writer, dataDir, logPath string) {
	ui := s.uiURL()
	if ui == "" {
		ui = "off (--no-ui)"
	}
	where := "SQLite in " + dataDir + "; sessions survive a restart"
	metricsNote, tracesNote := telemetryNote(s.tel)
	if abs, err := filepath.Abs(dataDir); err == nil {
		where = "SQLite in " + abs + "; sessions survive a restart"
	}
	if pg := s.server.Config().Postgres; pg != nil {
		where = fmt.Sprintf("PostgreSQL at %s (databases %s, %s); sessions survive a restart", pg.Address, pg.Database, pg.VisibilityDatabase)
	}
	fmt.Fprintf(w, `
keel dev is up.
  Temporal gRPC  %s  (namespace %s, task queue %s)
  Web UI         %s
  NATS (live)    %s
  HTTP API       %s  (OpenAPI: /v1/openapi.json)
  web page       %s
  codec endpoint %s  (reads the content store%s)
  encryption     %s
  data           %s
  content store  %s
  workspace      %s
  scripts        %s
  logs           %s
  metrics        %s
  traces         %s

Try it from another terminal:
  keel run%s "Give me a tour of the workspace"
  curl -H 'Content-Type: application/json' -d '{"prompt":"Give me a tour"}' %s/sessions/demo/runs
`, s.server.Address(), s.server.Namespace(), api.TaskQueue, ui, s.nats.ClientURL()+s.natsLogin.note(s.keys != nil), s.gatewayURL(), "http://"+s.httpL.Addr().String()+"/", s.codecURL, decryptsNote(s.keys), encryptionNote(s.keys), where,
		s.store.Store.URL(), s.workspace, scriptsNote(s.scripts), logPath, metricsNote, tracesNote, s.addressFlag()+s.natsFlag()+s.codecFlag(), s.gatewayURL())
}

// runDemo sends the demo prompt in a new session and renders the run as
// `keel run` does.
func (s *devStack) runDemo(ctx context.Context, stdout, stderr io.Writer) {
	n, err := live.DialNATS(s.nats.ClientURL(), s.liveOptions())
	if err != nil {
		fmt.Fprintf(stderr, "keel dev: demo: %s\n", sanitize(err.Error()))
		return
	}
	defer n.Close()
	// Send subscribes to the session's deltas before the run starts, so
	// the demo's first streamed words are not lost.
	kc, err := client.Dial(ctx, client.Options{Temporal: s.temporal, Live: n, DataConverter: s.dc})
	if err != nil {
		fmt.Fprintf(stderr, "keel dev: demo: %s\n", sanitize(err.Error()))
		return
	}
	defer kc.Close()
	sess := kc.NewSession()
	cfg := api.RunConfig{Model: api.DefaultModel, Tools: slices.Clone(scripted.DemoTools)}
	fmt.Fprintf(stdout, "\nDemo: sending %q to session %s (model %s)\n\n", demoPrompt, sess.ID(), cfg.Model)
	sendCtx, cancel := context.WithTimeout(ctx, time.Minute)
	run, err := sess.Send(sendCtx, demoPrompt, client.WithConfig(cfg))
	cancel()
	if err != nil {
		fail(stderr, "dev", fmt.Errorf("demo: %w", err))
		return
	}
	// A person at the terminal answers the run's questions here.
	r := newRenderer(stdout, renderOptions{color: useColor(stdout)})
	ask := newHostInput(ctx, run, r, false)
	r.opts.answering = ask != nil
	followRun(ctx, run, r, stderr, ask)
	if ctx.Err() != nil {
		return
	}
	if ui := s.uiURL(); ui != "" {
		fmt.Fprintf(stdout, "\nSee it in the Web UI (each model turn and tool call is an activity):\n  %s/namespaces/%s/workflows/%s\n",
			ui, url.PathEscape(s.server.Namespace()), url.PathEscape(sess.ID()))
	}
	flags := s.addressFlag() + s.codecFlag()
	fmt.Fprintf(stdout, "Or from another terminal:\n  keel history%s %s\n  keel events%s %s\n",
		flags, sess.ID(), flags, sess.ID())
}

// devStoreURL is the content store's URL: --store, else a directory
// under the data directory, else (tests, no data directory) memory.
func devStoreURL(cfg devConfig) (string, error) {
	if cfg.store != "" {
		return cfg.store, nil
	}
	if cfg.dataDir == "" {
		return "mem://", nil
	}
	dir, err := filepath.Abs(filepath.Join(cfg.dataDir, "store"))
	if err != nil {
		return "", fmt.Errorf("content store: %w", err)
	}
	return "file://" + dir, nil
}

// serveHTTP serves keel's HTTP endpoints on the HTTP listener: the
// content store's codec endpoint, which the Web UI (from the browser, so
// CORS allows its origin only) and keel's commands decode references
// with, and the HTTP API everywhere else.
func (s *devStack) serveHTTP() {
	mux := http.NewServeMux()
	mux.Handle("/codec/", http.StripPrefix("/codec", s.store.Codec.Handler(s.codecOptions())))
	mux.Handle("/", s.st.Gateway)
	s.http = httpguard.NewServer(mux)
	go func() { _ = s.http.Serve(s.httpL) }()
}

// codecOptions are the codec endpoint's: CORS and trust for the Web UI's
// origin, the token, the allowed hosts.
func (s *devStack) codecOptions() store.HandlerOptions {
	origin := ""
	if s.server != nil {
		origin = s.uiURL()
	}
	return store.HandlerOptions{AllowOrigin: origin, Token: s.codecToken, AllowedHosts: s.allowedHosts}
}

// gatewayURL is the HTTP API's base URL.
func (s *devStack) gatewayURL() string { return "http://" + s.httpL.Addr().String() + "/v1" }

// codecFlag is the flags another keel command needs to encrypt what it
// sends (a prompt is written to history by the command that sends it). It
// needs none to read this stack's content store, on any --http-port: the
// stack records its codec endpoint on its Temporal server
// (recordCodecEndpoint), where commands on this machine find it.
func (s *devStack) codecFlag() string { return keyFileFlag(s.keyFile) }

// devFrontendInterceptors run on every call that keel dev's Temporal
// frontend serves. keel sets none. The kill -9 tests run their own binary
// as keel dev and set one there (server/cmd/keel/devpause_test.go, armed by an
// environment variable only they set) that holds a call at a point they
// name, so the kill lands where they mean it to.
var devFrontendInterceptors []grpc.UnaryServerInterceptor
