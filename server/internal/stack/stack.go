package stack

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	sdkclient "go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/server/gateway"
	"github.com/keelrun/keel/server/telemetry"
	"github.com/keelrun/keel/server/worker"
)

// Config says what to build. Temporal is reached through exactly one of
// Server, Conn and Temporal; everything else is optional.
type Config struct {
	// Server is a Temporal server running in this process, handed in by
	// its caller (keel dev, the tests).
	Server Server
	// Conn is a Temporal server elsewhere, resolved once (Resolve).
	Conn *Conn
	// DialTimeout bounds dialling Conn, so a missing server is a quick
	// error; 0: ctx's deadline only.
	DialTimeout time.Duration
	// Temporal is a client to use as is (the benchmarks share theirs
	// between workers); Stop does not close it, and its data converter
	// must be Store's.
	Temporal sdkclient.Client
	// Namespace is Temporal's namespace: needed only with Temporal
	// (default "default"); Server and Conn say theirs.
	Namespace string

	// Store is the content store and the payloads' encryption.
	Store StoreConfig
	// Telemetry gives the clients and the worker their metrics handler
	// and tracing, and meters the gateway's live subscribers. Optional.
	Telemetry *telemetry.Telemetry

	// NATS is the live channel's NATS URL: the worker publishes to one
	// connection, the gateway subscribes on another, so many event
	// streams never slow publishing. "": none, unless Live.
	NATS        string
	NATSOptions live.NATSOptions
	// Live is a live channel to use instead of NATS (the in-process one);
	// the gateway subscribes to it too when it is a live.Channel. The
	// stack does not close it.
	Live live.Publisher

	// Worker, when set, starts a keel worker with these options; the
	// stack sets its Namespace, Codec, Live and telemetry. Its Logger is
	// also the Temporal client's (worker.ClientOptions).
	Worker *worker.Options
	// SearchAttributes registers keel's search attributes on the
	// namespace before the worker starts (a fresh server lacks them).
	SearchAttributes bool

	// Gateway, when set, builds the HTTP API over a keel client of its
	// own; serving it is the caller's.
	Gateway *gateway.Options
}

// Stack is what Build started. Its fields are read-only.
type Stack struct {
	// Temporal is the stack's Temporal client: the worker's and the
	// gateway's.
	Temporal sdkclient.Client
	// Address and Namespace are the server's.
	Address, Namespace string
	// Store is the opened content store.
	Store *ContentStore
	// NATS is the worker's NATS connection, nil unless Config.NATS.
	NATS *live.NATS
	// Worker is the started worker, nil unless Config.Worker. Its Stop
	// may be called before the stack's.
	Worker sdkworker.Worker
	// Gateway is the HTTP API, nil unless Config.Gateway; Client is its
	// keel client.
	Gateway *gateway.Gateway
	Client  *client.Client

	ownTemporal bool
	gatewayNATS *live.NATS
}

// Build builds and starts what cfg asks for. On error it stops whatever
// it had started.
func Build(ctx context.Context, cfg Config) (s *Stack, err error) {
	s = &Stack{}
	defer func() {
		if err != nil {
			_ = s.Stop()
			s = nil
		}
	}()
	if s.Store, err = OpenStore(ctx, cfg.Store); err != nil {
		return s, err
	}
	if err := s.dialLive(cfg); err != nil {
		return s, err
	}
	var wopts worker.Options
	if cfg.Worker != nil {
		wopts = *cfg.Worker
	}
	wopts.Codec, wopts.Live, wopts.DataConverter = s.Store.Codec, s.publisher(cfg), s.Store.DataConverter
	if cfg.Telemetry != nil {
		wopts.MetricsHandler = cfg.Telemetry.MetricsHandler()
		wopts = cfg.Telemetry.WorkerOptions(wopts)
	}
	if err := s.dialTemporal(ctx, cfg, wopts); err != nil {
		return s, err
	}
	if cfg.Worker != nil {
		if err := s.startWorker(ctx, cfg, wopts); err != nil {
			return s, err
		}
	}
	if cfg.Gateway != nil {
		if err := s.startGateway(ctx, cfg); err != nil {
			return s, err
		}
	}
	return s, nil
}

// dialLive connects the worker's live channel to NATS.
func (s *Stack) dialLive(cfg Config) error {
	if cfg.NATS == "" {
		return nil
	}
	var err error
	s.NATS, err = live.DialNATS(cfg.NATS, cfg.NATSOptions)
	return err
}

// publisher is the worker's live channel.
func (s *Stack) publisher(cfg Config) live.Publisher {
	if s.NATS != nil {
		return s.NATS
	}
	return cfg.Live
}

// dialTemporal connects the stack's Temporal client with the options a
// worker with wopts runs on (worker.ClientOptions, as worker.Dial's).
func (s *Stack) dialTemporal(ctx context.Context, cfg Config, wopts worker.Options) error {
	sdk, err := worker.ClientOptions(wopts)
	if err != nil {
		return err
	}
	if dc := s.Store.DataConverter; dc != nil {
		// The store's converter; without a store, the encryption's.
		sdk.DataConverter = dc
	}
	switch {
	case cfg.Temporal != nil:
		s.Temporal, s.Namespace = cfg.Temporal, cfg.Namespace
		if s.Namespace == "" {
			s.Namespace = "default"
		}
		return nil
	case cfg.Server != nil:
		s.Address, s.Namespace = cfg.Server.Address(), cfg.Server.Namespace()
		s.Temporal, err = cfg.Server.Dial(ctx, sdk)
	case cfg.Conn != nil:
		s.Address, s.Namespace = cfg.Conn.HostPort, cfg.Conn.Namespace
		s.Temporal, err = cfg.Conn.Dial(ctx, sdk, cfg.DialTimeout)
	default:
		return errors.New("stack: no Temporal server: set Server, Conn or Temporal")
	}
	if err != nil {
		return err
	}
	s.ownTemporal = true
	return nil
}

// startWorker starts the worker on the stack's client.
func (s *Stack) startWorker(ctx context.Context, cfg Config, opts worker.Options) error {
	if cfg.SearchAttributes {
		if err := worker.EnsureSearchAttributes(ctx, s.Temporal, s.Namespace); err != nil {
			return err
		}
	}
	opts.Namespace = s.Namespace
	w, err := worker.New(s.Temporal, opts)
	if err != nil {
		return err
	}
	if err := w.Start(); err != nil {
		return fmt.Errorf("start the worker: %w", err)
	}
	s.Worker = &stopOnce{Worker: w}
	return nil
}

// startGateway builds the HTTP API over a keel client of its own, on a
// NATS connection of its own.
func (s *Stack) startGateway(ctx context.Context, cfg Config) error {
	var ch live.Channel
	if cfg.NATS != "" {
		lo := cfg.NATSOptions
		lo.OnReject = telemetry.LiveRejected(cfg.Telemetry.MetricsHandler())
		var err error
		if s.gatewayNATS, err = live.DialNATS(cfg.NATS, lo); err != nil {
			return err
		}
		ch = s.gatewayNATS
	} else if c, ok := cfg.Live.(live.Channel); ok {
		ch = c
	}
	if ch != nil {
		// The HTTP API's event streams are the stack's live subscribers:
		// their lag is measured here.
		ch = telemetry.MeterLive(ch, cfg.Telemetry.MetricsHandler())
	}
	opts := client.Options{Temporal: s.Temporal, Namespace: s.Namespace, Live: ch, DataConverter: s.Store.DataConverter}
	if s.Store.Codec != nil {
		// POST /v1/attachments stores uploads where the workers read them.
		opts.Attachments = s.Store.Codec
	}
	var err error
	if s.Client, err = client.Dial(ctx, opts); err != nil {
		return err
	}
	s.Gateway, err = gateway.New(s.Client, *cfg.Gateway)
	return err
}

// Stop stops what Build started, in dependency order: the gateway (its
// event streams end first), the worker, the live channel, the clients,
// the store. It is safe on a partly built stack.
func (s *Stack) Stop() error {
	var errs []error
	if s.Gateway != nil {
		s.Gateway.Close()
	}
	if s.Worker != nil {
		s.Worker.Stop()
	}
	if s.NATS != nil {
		errs = append(errs, s.NATS.Close())
	}
	if s.Client != nil {
		s.Client.Close()
	}
	if s.gatewayNATS != nil {
		errs = append(errs, s.gatewayNATS.Close())
	}
	if s.ownTemporal {
		s.Temporal.Close()
	}
	errs = append(errs, s.Store.Close())
	return errors.Join(errs...)
}

// stopOnce lets the worker be stopped early (a test's crash) and again
// by Stop.
type stopOnce struct {
	sdkworker.Worker
	once sync.Once
}

func (w *stopOnce) Stop() { w.once.Do(w.Worker.Stop) }
