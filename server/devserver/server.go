package devserver

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/membership/static"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
	"go.uber.org/zap"
)

// clusterName is persisted in the database on first start and must never
// change for an existing DataDir.
const clusterName = "active"

// Server is a running embedded Temporal server. Its methods are safe for
// concurrent use.
type Server struct {
	cfg      Config
	address  string
	uiAddr   string
	temporal temporal.Server
	ui       *webUI
	logger   serverLogger
	unlock   func()       // releases DataDir
	tls      *frontendTLS // nil: plain gRPC

	stopOnce sync.Once
	stopErr  error
}

// Start starts a Temporal server in this process as cfg says and returns once
// it answers requests on the namespace. ctx bounds the start only; the server
// runs until Stop.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	// Free ports are chosen before they are bound, so another process can
	// take one in between; that shows as a fatal listener error, and a new
	// set of ports fixes it.
	for attempt := 1; ; attempt++ {
		s, err := start(ctx, cfg)
		if err != nil && ctx.Err() != nil {
			// Temporal's persistence layer reports a cancelled context as
			// an unavailable store; say what happened.
			return nil, fmt.Errorf("devserver: start: %w: %w", ctx.Err(), err)
		}
		var fatal fatalError
		if err == nil || !errors.As(err, &fatal) || attempt == 3 {
			return s, err
		}
		cfg.Logger.Warn("devserver: retrying start", zap.Error(err))
	}
}

func start(ctx context.Context, cfg Config) (s *Server, err error) {
	logger := newServerLogger(cfg.Logger, cfg.LogLevel)
	var undo []func() // releases what this attempt acquired, if it fails
	defer func() {
		// The server reports unusable configuration through its Fatal log
		// path, which panics with a fatalError here (see serverLogger).
		if r := recover(); r != nil {
			fatal, ok := r.(fatalError)
			if !ok {
				panic(r)
			}
			s, err = nil, fatal
		}
		if err != nil {
			for _, f := range slices.Backward(undo) {
				f()
			}
		}
	}()

	if cfg.Port == AnyPort {
		if cfg.Port, err = freePort(cfg.IP); err != nil {
			return nil, err
		}
	} else if cfg.Cluster != nil && !cfg.Cluster.runs(primitives.FrontendService) {
		// The frontend is another process's.
	} else if err := checkPortFree(cfg.IP, cfg.Port); err != nil {
		return nil, err
	}
	var uiListener net.Listener
	if !cfg.DisableUI {
		port := max(cfg.UIPort, 0) // AnyPort: let the OS choose
		addr := net.JoinHostPort(cfg.IP, strconv.Itoa(port))
		if uiListener, err = net.Listen("tcp", addr); err != nil {
			return nil, fmt.Errorf("%w: web UI on %s: %v", ErrPortInUse, addr, err)
		}
		undo = append(undo, func() { _ = uiListener.Close() })
		cfg.UIPort = uiListener.Addr().(*net.TCPAddr).Port
	}
	unlock := func() {}
	if cfg.DataDir != "" {
		if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
			return nil, fmt.Errorf("devserver: data dir: %w", err)
		}
		if unlock, err = lockDataDir(cfg.DataDir); err != nil {
			return nil, err
		}
		undo = append(undo, unlock)
	}

	stores, err := dataStores(ctx, cfg, logger)
	if err != nil {
		return nil, err
	}
	if err := ensureNamespace(ctx, stores.executions, cfg, logger); err != nil {
		return nil, err
	}
	serverCfg, hosts, err := serverConfig(cfg, stores)
	if err != nil {
		return nil, err
	}
	var ftls *frontendTLS
	if cfg.TLS != nil {
		if ftls, err = newFrontendTLS(cfg.TLS); err != nil {
			return nil, err
		}
	}
	// No authorization: the dev server listens on loopback by default.
	claimMapper := authorization.NewNoopClaimMapper()
	services, membership := temporal.DefaultServices, temporal.WithStaticHosts(hosts)
	if cfg.Cluster != nil {
		// No static hosts: the services find each other through ringpop.
		services, membership = cfg.Cluster.Services, nil
	}
	opts := []temporal.ServerOption{
		temporal.WithConfig(serverCfg),
		temporal.ForServices(services),
		temporal.WithLogger(logger),
		temporal.WithAuthorizer(authorization.NewNoopAuthorizer()),
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return claimMapper }),
		temporal.WithDynamicConfigClient(dynamicConfigFor(cfg)),
	}
	if membership != nil {
		opts = append(opts, membership)
	}
	if ftls != nil {
		opts = append(opts, temporal.WithTLSConfigFactory(ftls.provider()))
	}
	if len(cfg.FrontendInterceptors) > 0 {
		opts = append(opts, temporal.WithChainedFrontendGrpcInterceptors(cfg.FrontendInterceptors...))
	}
	if cfg.MetricsHandler != nil {
		opts = append(opts, temporal.WithCustomMetricsHandler(cfg.MetricsHandler))
	}
	ts, err := temporal.NewServer(opts...)
	if err != nil {
		return nil, fmt.Errorf("devserver: build temporal server: %w", err)
	}
	// Stopping a server whose Start failed releases what it did start.
	undo = append(undo, func() {
		logger.stopping.Store(true)
		_ = ts.Stop()
	})
	if err := ts.Start(); err != nil {
		return nil, fmt.Errorf("devserver: start temporal server: %w", err)
	}
	s = &Server{
		cfg:      cfg,
		address:  net.JoinHostPort(dialableIP(cfg.IP), strconv.Itoa(cfg.Port)),
		temporal: ts,
		logger:   logger,
		unlock:   unlock,
		tls:      ftls,
	}
	switch {
	case cfg.Cluster == nil:
		if err := s.waitReady(ctx); err != nil {
			return nil, err
		}
	case cfg.Cluster.runs(primitives.FrontendService):
		// A cluster's frontend is healthy once it sees the other services
		// in the ring, which may still be starting.
		if err := s.waitClusterReady(ctx); err != nil {
			return nil, err
		}
	}
	if uiListener != nil {
		var uiTLS *tls.Config
		if ftls != nil {
			uiTLS = ftls.client
		}
		if s.ui, err = startWebUI(uiListener, s.address, uiTLS, cfg.Namespace, cfg.UICodecEndpoint, cfg.UIAllowedHosts); err != nil {
			return nil, err
		}
		s.uiAddr = net.JoinHostPort(dialableIP(cfg.IP), strconv.Itoa(cfg.UIPort))
	}
	return s, nil
}

// waitReady returns once the frontend serves the namespace: Temporal's
// Start returns before its gRPC servers accept work.
func (s *Server) waitReady(ctx context.Context) error {
	c, err := s.Dial(ctx, client.Options{})
	if err != nil {
		return fmt.Errorf("devserver: frontend not ready: %w", err)
	}
	defer c.Close()
	_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: s.cfg.Namespace})
	if err != nil {
		return fmt.Errorf("devserver: namespace %q not ready: %w", s.cfg.Namespace, err)
	}
	return nil
}

// waitClusterReady is waitReady, asked again every clusterReadyPoll until
// ctx ends.
func (s *Server) waitClusterReady(ctx context.Context) error {
	for {
		err := s.waitReady(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(clusterReadyPoll):
		}
	}
}

// fileConnectAttributes open the database file. WAL with synchronous=NORMAL
// commits without an fsync per transaction: a killed process loses nothing,
// a power cut may lose the last commits but never corrupts the file. A
// variable only so the tuning benchmark can compare SQLite's defaults.
var fileConnectAttributes = map[string]string{
	"mode":         "rwc",
	"journal_mode": "wal",
	"synchronous":  "1",
}

// sqlStores are the server's two data stores; SQLite keeps both in one
// database.
type sqlStores struct {
	executions, visibility *config.SQL
}

// dataStores returns the persistence settings, creating databases and
// schemas where missing.
func dataStores(ctx context.Context, cfg Config, logger serverLogger) (sqlStores, error) {
	if pg := cfg.Postgres; pg != nil {
		if err := setupPostgres(ctx, pg, logger); err != nil {
			return sqlStores{}, err
		}
		return sqlStores{pg.sqlConfig(pg.Database), pg.sqlConfig(pg.VisibilityDatabase)}, nil
	}
	sqlCfg, err := sqlConfig(cfg)
	return sqlStores{sqlCfg, sqlCfg}, err
}

// sqlConfig returns the SQLite settings, creating the schema in a new
// database file.
func sqlConfig(cfg Config) (*config.SQL, error) {
	if cfg.DataDir == "" {
		// Each in-memory server gets its own database: the plugin keeps one
		// connection per name for the life of the process.
		var b [8]byte
		_, _ = rand.Read(b[:])
		return &config.SQL{
			PluginName:        sqliteplugin.PluginName,
			DatabaseName:      "keel-" + hex.EncodeToString(b[:]),
			ConnectAttributes: map[string]string{"mode": "memory", "cache": "shared"},
		}, nil
	}
	path := filepath.Join(cfg.DataDir, DatabaseFile)
	sqlCfg := &config.SQL{
		PluginName:        sqliteplugin.PluginName,
		DatabaseName:      path,
		ConnectAttributes: maps.Clone(fileConnectAttributes),
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		if err := sqliteschema.SetupSchema(sqlCfg); err != nil {
			return nil, fmt.Errorf("devserver: create schema in %s: %w", path, err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("devserver: database: %w", err)
	}
	return sqlCfg, nil
}

// serverConfig builds the static server configuration: one process, one
// history shard, every service on its own loopback port.
func serverConfig(cfg Config, stores sqlStores) (*config.Config, map[primitives.ServiceName]static.Hosts, error) {
	const internalIP = "127.0.0.1"
	frontendHost := net.JoinHostPort(dialableIP(cfg.IP), strconv.Itoa(cfg.Port))
	if cfg.Cluster != nil {
		return clusterConfig(cfg, stores)
	}
	services := map[string]config.Service{
		string(primitives.FrontendService): {RPC: config.RPC{GRPCPort: cfg.Port, BindOnIP: cfg.IP}},
	}
	hosts := map[primitives.ServiceName]static.Hosts{
		primitives.FrontendService: static.SingleLocalHost(frontendHost),
	}
	for _, name := range []primitives.ServiceName{primitives.HistoryService, primitives.MatchingService, primitives.WorkerService} {
		port, err := freePort(internalIP)
		if err != nil {
			return nil, nil, err
		}
		services[string(name)] = config.Service{RPC: config.RPC{GRPCPort: port, BindOnIP: internalIP}}
		hosts[name] = static.SingleLocalHost(net.JoinHostPort(internalIP, strconv.Itoa(port)))
	}

	// Static hosts replace ringpop; only the broadcast address is read.
	c := baseConfig(stores, frontendHost, services, config.Membership{BroadcastAddress: internalIP}, 1)
	return c, hosts, nil
}

// clusterConfig is the configuration of one member of a Cluster: every
// service's ports, ringpop membership, and the cluster's history shards.
func clusterConfig(cfg Config, stores sqlStores) (*config.Config, map[primitives.ServiceName]static.Hosts, error) {
	shards := cfg.Cluster.HistoryShards
	if shards == 0 {
		shards = 1
	}
	membership := config.Membership{BroadcastAddress: "127.0.0.1", MaxJoinDuration: clusterJoinTimeout}
	return baseConfig(stores, cfg.Cluster.frontendAddress(), cfg.Cluster.clusterServices(), membership, shards), nil, nil
}

// baseConfig is the static server configuration around its services and
// membership.
func baseConfig(stores sqlStores, frontendHost string, services map[string]config.Service, membership config.Membership, shards int32) *config.Config {
	c := &config.Config{
		Global: config.Global{Membership: membership},
		Persistence: config.Persistence{
			DefaultStore:     "executions",
			VisibilityStore:  "visibility",
			NumHistoryShards: shards,
			DataStores: map[string]config.DataStore{
				"executions": {SQL: stores.executions},
				"visibility": {SQL: stores.visibility},
			},
		},
		ClusterMetadata: &cluster.Config{
			FailoverVersionIncrement: 10,
			MasterClusterName:        clusterName,
			CurrentClusterName:       clusterName,
			ClusterInformation: map[string]cluster.ClusterInformation{
				clusterName: {
					Enabled:                true,
					InitialFailoverVersion: 1,
					RPCAddress:             frontendHost,
				},
			},
		},
		DCRedirectionPolicy: config.DCRedirectionPolicy{Policy: "noop"},
		Services:            services,
		Archival: config.Archival{
			History:    config.HistoryArchival{State: "disabled"},
			Visibility: config.VisibilityArchival{State: "disabled"},
		},
		NamespaceDefaults: config.NamespaceDefaults{
			Archival: config.ArchivalNamespaceDefaults{
				History:    config.HistoryArchivalNamespaceDefaults{State: "disabled"},
				Visibility: config.VisibilityArchivalNamespaceDefaults{State: "disabled"},
			},
		},
		// The server's own worker service dials the frontend here.
		PublicClient: config.PublicClient{HostPort: frontendHost},
	}
	return c
}

// Address is the frontend's host:port for clients (client.Options.HostPort).
func (s *Server) Address() string { return s.address }

// UIAddress is the Web UI's host:port, "" if the UI is disabled.
func (s *Server) UIAddress() string { return s.uiAddr }

// Namespace is the namespace the server was started with.
func (s *Server) Namespace() string { return s.cfg.Namespace }

// Config returns the configuration the server runs with, defaults filled
// in and AnyPort replaced by the ports chosen: Start(ctx, s.Config()) after
// Stop restarts the same server on the same ports and data.
func (s *Server) Config() Config { return s.cfg }

// Dial returns a client of this server. HostPort and Namespace default to
// the server's, and Logger to one as quiet as the server's logs. On a
// server with Config.TLS, the connection's TLS defaults to the server's own
// client certificate (see Config.TLS).
func (s *Server) Dial(ctx context.Context, opts client.Options) (client.Client, error) {
	if s.tls != nil && opts.ConnectionOptions.TLS == nil && !opts.ConnectionOptions.TLSDisabled {
		opts.ConnectionOptions.TLS = s.tls.client
	}
	if opts.HostPort == "" {
		opts.HostPort = s.address
	}
	if opts.Namespace == "" {
		opts.Namespace = s.cfg.Namespace
	}
	if opts.Logger == nil {
		opts.Logger = sdkLogger(s.cfg.Logger, s.cfg.LogLevel)
	}
	return client.DialContext(ctx, opts)
}

// Stop stops the Web UI and the server and closes their listeners, so the
// same ports can be bound again. Later calls return the first call's result.
// An in-memory server's data is gone after Stop.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		s.logger.stopping.Store(true)
		var errs []error
		if s.ui != nil {
			errs = append(errs, s.ui.stop())
		}
		errs = append(errs, s.temporal.Stop())
		s.unlock()
		s.stopErr = errors.Join(errs...)
	})
	return s.stopErr
}
