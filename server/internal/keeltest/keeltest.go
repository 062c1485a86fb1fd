// Package keeltest starts real keel stacks for tests, in process and
// cleaned up with the test: an embedded Temporal server (StartServer) with
// its content store (Codec), an embedded NATS server and its connections,
// workers built by package stack (StartWorker), Temporal and keel clients,
// and scripted models (ScriptModels, ScriptBook). For tests that need
// more, it builds the keel binary (KeelBinary, or $KEEL_BIN) and makes
// fresh PostgreSQL databases (Postgres, which skips without
// $KEEL_POSTGRES_DSN).
package keeltest

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/internal/delegation"
	"github.com/keelrun/keel/internal/schedreg"
	"github.com/keelrun/keel/internal/testlog"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/logging"
	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/eval"
	"github.com/keelrun/keel/server/hook"
	"github.com/keelrun/keel/server/internal/stack"
	"github.com/keelrun/keel/server/provider"
	"github.com/keelrun/keel/server/provider/scripted"
	"github.com/keelrun/keel/server/store"
	"github.com/keelrun/keel/server/tool"
	"github.com/keelrun/keel/server/worker"
)

// StartServer starts an embedded Temporal server on free ports without the
// Web UI, in memory unless cfg.DataDir is set, with its warnings in the
// test's log (shown when the test fails), stopped when tb ends.
func StartServer(tb testing.TB, cfg devserver.Config) *devserver.Server {
	tb.Helper()
	if cfg.Port == 0 {
		cfg.Port = devserver.AnyPort
	}
	if cfg.Logger == nil {
		cfg.Logger = testlog.New(tb)
	}
	cfg.DisableUI = true
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := devserver.Start(ctx, cfg)
	if err != nil {
		tb.Fatalf("start server: %v", err)
	}
	tb.Cleanup(func() { _ = srv.Stop() })
	return srv
}

// Codec returns the content store's codec that the workers and clients of
// srv share, as in a real deployment: a directory under the server's data
// directory (so it outlives a restart on the same directory), or memory
// for an in-memory server.
func Codec(tb testing.TB, srv *devserver.Server) *store.Codec {
	tb.Helper()
	key := any(srv)
	if dir := srv.Config().DataDir; dir != "" {
		key = dir
	}
	if c, ok := codecs.Load(key); ok {
		return c.(*store.Codec)
	}
	url := "mem://"
	if dir, ok := key.(string); ok {
		url = "file://" + filepath.Join(dir, "store")
	}
	st, err := store.Open(context.Background(), url)
	if err != nil {
		tb.Fatalf("content store: %v", err)
	}
	c, _ := codecs.LoadOrStore(key, store.NewCodec(st, store.CodecOptions{}))
	return c.(*store.Codec)
}

// codecs holds the codec of each server (or data directory) for the
// life of the test binary: a restarted server finds its values again.
var codecs sync.Map

// Dial returns a Temporal client of srv, closed when tb ends. It encodes
// and decodes payloads through srv's content store (Codec).
func Dial(tb testing.TB, srv *devserver.Server) sdkclient.Client {
	tb.Helper()
	c, err := srv.Dial(context.Background(), sdkclient.Options{DataConverter: store.NewDataConverter(Codec(tb, srv))})
	if err != nil {
		tb.Fatalf("dial: %v", err)
	}
	tb.Cleanup(c.Close)
	return c
}

// WorkerOptions configures StartWorker.
type WorkerOptions struct {
	// Script, when set, plays for the default model (api.DefaultModel),
	// the only model the worker then offers (ScriptModels).
	Script string
	// Models overrides Script.
	Models activities.ModelResolver
	// Tools defaults to the built-ins on a temporary workspace.
	Tools *tool.Registry
	Live  live.Publisher
	// HeartbeatInterval, NoCancelWatch and Policy are worker.Options'.
	HeartbeatInterval time.Duration
	NoCancelWatch     bool
	// Policy is worker.Options' (prices, budgets, caps); zero: none.
	Policy activities.Policy
	// Agents are worker.Options' (docs/contract.md §21.2).
	Agents map[string]delegation.AgentSpec
	// Schedules are worker.Options' (docs/contract.md §22.11).
	Schedules schedreg.ScheduleLimits
	// MetricsHandler is worker.Options': keel's metrics and the SDK's.
	MetricsHandler sdkclient.MetricsHandler
	// Hooks are worker.Options' (docs/contract.md §23).
	Hooks map[string]hook.Hook
	// Scorers are worker.Options' (docs/contract.md §24).
	Scorers []eval.Scorer
}

// StartWorker starts a keel worker on srv with its own Temporal client,
// built by package stack as keel dev builds its worker. It is stopped
// when tb ends; stop it earlier with its Stop.
func StartWorker(tb testing.TB, srv *devserver.Server, opts WorkerOptions) sdkworker.Worker {
	tb.Helper()
	models := opts.Models
	if models == nil && opts.Script != "" {
		models = ScriptModels(tb, opts.Script)
	}
	tools := opts.Tools
	if tools == nil {
		var err error
		if tools, err = tool.Builtins(tb.TempDir()); err != nil {
			tb.Fatalf("tools: %v", err)
		}
	}
	// The worker logs where the server does (the test's log), as quietly.
	cfg := srv.Config()
	st, err := stack.Build(context.Background(), stack.Config{
		Server: srv,
		Store:  stack.StoreConfig{Codec: Codec(tb, srv)},
		Live:   opts.Live,
		Worker: &worker.Options{Models: models, Tools: tools, StopTimeout: time.Second,
			Logger: logging.AtLeast(cfg.Logger, cfg.LogLevel), HeartbeatInterval: opts.HeartbeatInterval, NoCancelWatch: opts.NoCancelWatch,
			Policy: opts.Policy,
			Agents: opts.Agents, Schedules: opts.Schedules, MetricsHandler: opts.MetricsHandler, Hooks: opts.Hooks,
			Scorers: opts.Scorers},
	})
	if err != nil {
		tb.Fatalf("worker: %v", err)
	}
	tb.Cleanup(func() { _ = st.Stop() })
	return st.Worker
}

// Client returns a keel client of srv with its own Temporal connection.
func Client(tb testing.TB, srv *devserver.Server, ch live.Channel) *client.Client {
	tb.Helper()
	c, err := client.Dial(context.Background(), client.Options{Temporal: Dial(tb, srv), Live: ch,
		DataConverter: store.NewDataConverter(Codec(tb, srv)), Attachments: Codec(tb, srv)})
	if err != nil {
		tb.Fatalf("client: %v", err)
	}
	return c
}

// StartReleasedSession starts session id as keel v0.1.0's clients did: an
// execution whose input has no api.SessionInput.Shape, so that the
// session runs as v0.1.0's did (it records commit markers and upserts
// KeelState) in every execution. A keel client's send joins it.
func StartReleasedSession(tb testing.TB, c *client.Client, id string) {
	tb.Helper()
	_, err := c.Temporal().ExecuteWorkflow(context.Background(), sdkclient.StartWorkflowOptions{ID: id, TaskQueue: api.TaskQueue,
		TypedSearchAttributes: temporal.NewSearchAttributes(api.AttrSessionID.ValueSet(id))},
		api.SessionWorkflowName, api.SessionInput{SessionID: id})
	if err != nil {
		tb.Fatalf("start session %s: %v", id, err)
	}
}

// ScriptModels is a worker's model catalogue that plays script for the
// default model (api.DefaultModel, what a run that names no model uses)
// and offers nothing else: the worker refuses every other spec at send, as
// it refuses what its own catalogue does not hold.
func ScriptModels(tb testing.TB, script string) activities.ModelResolver {
	tb.Helper()
	s, err := scripted.Parse([]byte(script))
	if err != nil {
		tb.Fatalf("script: %v", err)
	}
	return fixedModel{scripted.New(s)}
}

type fixedModel struct{ p provider.Provider }

var _ worker.Catalog = fixedModel{}

func (m fixedModel) Admits(spec string) bool { return spec == api.DefaultModel }

func (m fixedModel) Offer() string { return api.DefaultModel }

func (m fixedModel) Resolve(spec string) (provider.Provider, string, error) {
	if !m.Admits(spec) {
		return nil, "", &keel.ProviderError{Provider: "keel", Kind: keel.ProviderUnknownModel,
			Message: "model not offered by this worker; it offers " + m.Offer()}
	}
	return m.p, "scripted", nil
}

// ScriptBook is a worker's model catalogue (worker.Models) whose scripts
// tests add by name, so one worker can serve many tests, each with its
// own script: "scripted:NAME" plays the script added as NAME, from an
// in-memory scripted.Library, through the same admission and resolution
// as a worker's scripts directory. The zero value is ready; pass its
// address as the worker's Models.
type ScriptBook struct {
	once   sync.Once
	lib    scripted.Library
	models *worker.Models
}

var (
	_ worker.Catalog          = (*ScriptBook)(nil)
	_ activities.ModelLabeler = (*ScriptBook)(nil)
)

func (b *ScriptBook) catalog() *worker.Models {
	b.once.Do(func() { b.models = &worker.Models{Scripts: &b.lib} })
	return b.models
}

// Add registers a script under name (a test name is fine: characters a
// script name may not hold become '-') and returns its model spec.
func (b *ScriptBook) Add(tb testing.TB, name, script string) string {
	tb.Helper()
	s, err := scripted.Parse([]byte(script))
	if err != nil {
		tb.Fatalf("script %s: %v", name, err)
	}
	name = ScriptName(name)
	if err := b.lib.Add(name, s); err != nil {
		tb.Fatalf("script %s: %v", name, err)
	}
	return "scripted:" + name
}

// ScriptName turns s (a test's name) into a valid script name.
func ScriptName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '-'
		}
	}
	if len(b) == 0 || b[0] == '-' {
		b = append([]byte("s"), b...)
	}
	if len(b) > scripted.MaxNameBytes {
		b = b[:scripted.MaxNameBytes]
	}
	return string(b)
}

// Resolve implements activities.ModelResolver.
func (b *ScriptBook) Resolve(spec string) (provider.Provider, string, error) {
	return b.catalog().Resolve(spec)
}

// Admits implements worker.Catalog.
func (b *ScriptBook) Admits(spec string) bool { return b.catalog().Admits(spec) }

// Offer implements worker.Catalog.
func (b *ScriptBook) Offer() string { return b.catalog().Offer() }

// ModelLabel implements activities.ModelLabeler.
func (b *ScriptBook) ModelLabel(spec, model string) string {
	return b.catalog().ModelLabel(spec, model)
}
