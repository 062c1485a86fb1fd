package devserver

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"time"

	"go.temporal.io/server/common/metrics"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"

	"github.com/keelrun/keel/logging"
)

// Defaults follow Temporal's own dev server, so the temporal CLI and the Web
// UI find keel's server where they expect one.
const (
	DefaultIP        = "127.0.0.1"
	DefaultPort      = 7233
	DefaultUIPort    = 8233
	DefaultNamespace = "default"
	// DefaultRetention keeps closed runs for 30 days: agent sessions are
	// inspected long after they end.
	DefaultRetention = 30 * 24 * time.Hour
	// DatabaseFile is the name of the SQLite file inside Config.DataDir.
	DatabaseFile = "temporal.db"
)

// AnyPort asks for a free port chosen by the operating system, for Config.Port
// and Config.UIPort. Server.Address and Server.UIAddress report the port
// chosen, and Server.Config returns it so a restart can bind it again.
const AnyPort = -1

// Config says how to run the embedded server. The zero value is a usable
// in-memory server on Temporal's default ports with the Web UI.
type Config struct {
	// DataDir holds the SQLite database (DataDir/temporal.db), so workflows
	// survive a restart. The directory is created if missing. Optional:
	// default "" keeps everything in memory, which suits tests; an in-memory
	// server forgets everything when stopped.
	DataDir string

	// Postgres keeps the server's data in PostgreSQL instead of SQLite
	// (see Postgres); DataDir must then be empty. Optional: default SQLite.
	Postgres *Postgres

	// IP the frontend and the Web UI listen on. Optional: default 127.0.0.1.
	IP string

	// Port of the frontend gRPC API that clients dial. Optional: default 0
	// means 7233; AnyPort means a free port chosen at start.
	Port int

	// UIPort of the Temporal Web UI. Optional: default 0 means 8233; AnyPort
	// means a free port chosen at start. Ignored when DisableUI is set.
	UIPort int

	// DisableUI runs no Web UI (tests). Optional: default false.
	DisableUI bool
	// UICodecEndpoint is the codec endpoint the Web UI decodes payloads
	// with (keel serves one for its content store), so it shows the values
	// behind content-store references. Optional: none.
	UICodecEndpoint string
	// UIAllowedHosts are the host names (or IP addresses, no port) the Web
	// UI answers to besides its own address and, on loopback, localhost.
	// A request naming any other host in its Host header gets 403: a web
	// page whose name was made to resolve to the UI (DNS rebinding) would
	// otherwise read every workflow's history through the UI's API.
	// Optional: none.
	UIAllowedHosts []string

	// Namespace created on first start, idempotently checked on later
	// starts, with keel's search attributes registered on it. Optional:
	// default "default".
	Namespace string

	// Retention of closed workflows in Namespace, applied on every start.
	// Optional: default 30 days. Shorter values are allowed only because
	// someone asked for them explicitly (tests).
	Retention time.Duration

	// Untuned runs Temporal's stock dynamic config instead of keel's
	// latency tuning (TunedDynamicConfig), so benchmarks can compare the two.
	// Optional: default false.
	Untuned bool

	// DynamicConfig overrides dynamic config keys (for example
	// "history.transferProcessorMaxPollRPS": 1000) on top of the tuned or
	// stock values. Durations may be time.Duration or strings like "100ms".
	// Optional.
	DynamicConfig map[string]any

	// Logger receives the server's own logs (with the field component
	// "temporal") and those of the SDK clients Dial returns. Optional:
	// default logging.Default().
	Logger *zap.Logger

	// LogLevel is the least severe server log record passed to Logger.
	// Temporal is chatty at info level, so the default keeps the terminal
	// quiet. Optional: default zapcore.WarnLevel.
	LogLevel zapcore.LevelEnabler

	// TLS serves the frontend's gRPC API with TLS: the certificate in
	// TLS.Certificates (the first is the one served), and client
	// certificates as TLS.ClientAuth and TLS.ClientCAs say
	// (tls.RequireAndVerifyClientCert: mutual TLS, a client without a
	// certificate signed by one of ClientCAs is refused). The server's own
	// clients (its system worker, the Web UI, Server.Dial) get in with a
	// certificate the server makes for itself at start, and trust exactly
	// the served certificate. Optional: default plain gRPC.
	TLS *tls.Config

	// FrontendInterceptors run on every gRPC call the frontend serves (from
	// clients and workers alike), after Temporal's own interceptors; a
	// benchmark counts the calls by method with one. Optional: none.
	FrontendInterceptors []grpc.UnaryServerInterceptor

	// Cluster runs only some of the server's services in this process,
	// as one member of a cluster of processes on one PostgreSQL (see
	// Cluster). Optional: default nil runs every service here, with one
	// history shard. Needs Postgres; the Web UI is not started.
	Cluster *Cluster

	// MetricsHandler receives the server's metrics; a benchmark counts
	// persistence requests by operation with one. Optional: default none
	// (Temporal's no-op handler).
	MetricsHandler metrics.Handler
}

// withDefaults returns cfg with every unset field filled in. Ports stay
// unresolved (AnyPort is resolved when listening).
func (cfg Config) withDefaults() (Config, error) {
	if cfg.IP == "" {
		cfg.IP = DefaultIP
	}
	if net.ParseIP(cfg.IP) == nil {
		return cfg, fmt.Errorf("devserver: IP %q is not an IP address", cfg.IP)
	}
	var err error
	if cfg.Port, err = portOrDefault("Port", cfg.Port, DefaultPort); err != nil {
		return cfg, err
	}
	if cfg.UIPort, err = portOrDefault("UIPort", cfg.UIPort, DefaultUIPort); err != nil {
		return cfg, err
	}
	if cfg.TLS != nil && (len(cfg.TLS.Certificates) == 0 || len(cfg.TLS.Certificates[0].Certificate) == 0) {
		return cfg, errTLSCertificate
	}
	if _, err := uiGuard(cfg.UIAllowedHosts); err != nil {
		return cfg, err
	}
	if cfg.Namespace == "" {
		cfg.Namespace = DefaultNamespace
	}
	if cfg.Retention == 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.Retention < 0 {
		return cfg, fmt.Errorf("devserver: negative Retention %v", cfg.Retention)
	}
	if cfg.Logger == nil {
		cfg.Logger = logging.Default()
	}
	if cfg.LogLevel == nil {
		cfg.LogLevel = zapcore.WarnLevel
	}
	if cfg.Postgres != nil {
		if cfg.DataDir != "" {
			return cfg, errors.New("devserver: DataDir and Postgres both set; the data lives in one of them")
		}
		if cfg.Postgres, err = cfg.Postgres.withDefaults(); err != nil {
			return cfg, err
		}
	}
	if cfg.Cluster != nil {
		if cfg.Postgres == nil {
			return cfg, fmt.Errorf("%w: needs Postgres (its processes share one database)", errClusterConfig)
		}
		if err := cfg.Cluster.check(); err != nil {
			return cfg, err
		}
		cfg.DisableUI = true
		cfg.Port = cfg.Cluster.Ports["frontend"].GRPC
	}
	if cfg.DataDir != "" {
		// The SQLite plugin shares one connection per DSN across the whole
		// process, so the same directory must always spell the same path.
		abs, err := filepath.Abs(cfg.DataDir)
		if err != nil {
			return cfg, fmt.Errorf("devserver: data dir: %w", err)
		}
		cfg.DataDir = abs
	}
	return cfg, nil
}

func portOrDefault(name string, port, def int) (int, error) {
	switch {
	case port == 0:
		return def, nil
	case port == AnyPort:
		return AnyPort, nil
	case port < 0 || port > 65535:
		return 0, fmt.Errorf("devserver: %s %d out of range", name, port)
	}
	return port, nil
}

// ErrDataDirInUse reports that another server, in this process or another,
// runs on Config.DataDir: two servers on one database would both claim its
// history shard.
var ErrDataDirInUse = errors.New("devserver: data dir in use")

// ErrPortInUse reports that a fixed port asked for in Config is taken, for
// example by another dev server.
var ErrPortInUse = errors.New("devserver: port in use")
