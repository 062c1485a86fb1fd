// Package worker assembles a keel worker: it registers keel's workflows
// and activities on the "keel" task queue with the models (Models, the
// provider factories) and tools the worker offers, and adds what a worker
// needs around them: search attributes, Worker Deployment versioning, the
// fast path of cancellation (cancelwatch.go, cancelnotice.go), the rate
// gate of the RateLimit workflows, the activities of a schedule's firing
// and MCP servers. Dial connects to Temporal as package connect says:
//
//	c, opts, err := worker.Dial(ctx, connect.Options{}, worker.Options{Workspace: "./workspace"})
//	if err != nil {
//		return err
//	}
//	defer c.Close()
//	w, err := worker.New(c, opts)
//	if err != nil {
//		return err
//	}
//	return w.Run(sdkworker.InterruptCh()) // go.temporal.io/sdk/worker
package worker

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdkworker "go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/delegation"
	"github.com/keelrun/keel/internal/instrument"
	"github.com/keelrun/keel/internal/ratelimit"
	"github.com/keelrun/keel/internal/schedreg"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/logging"
	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/eval"
	"github.com/keelrun/keel/server/hook"
	"github.com/keelrun/keel/server/store"
	"github.com/keelrun/keel/server/tool"
	"github.com/keelrun/keel/server/tool/mcp"
)

// AgentSpec, DelegationLimits and ScheduleLimits are the worker's own
// settings of Options (Agents, Delegation, Schedules): keel.yaml's agents
// and limits. They are defined beside keel's workflows, which record them
// in history, and are no part of what clients send (package api).
type (
	AgentSpec        = delegation.AgentSpec
	DelegationLimits = delegation.DelegationLimits
	ScheduleLimits   = schedreg.ScheduleLimits
)

// Options configures a worker. Every field is optional.
type Options struct {
	// TaskQueue to poll. Default api.TaskQueue ("keel").
	TaskQueue string
	// Namespace the client is connected to, for listing workflows at
	// shutdown. Default "default".
	Namespace string
	// Models decides which model specs clients may name and resolves
	// them: a *Models (the worker's catalogue: named models, scripts,
	// providers, the operator's allow list), or any Catalog, whose
	// refusals the worker applies at send, before a run starts; any other
	// activities.ModelResolver decides at the run's first model turn.
	// Default: DefaultModels(), the built-in demo and the providers the
	// environment configures (docs/providers.md).
	Models activities.ModelResolver
	// Tools the worker can run. Default: tool.Builtins(Workspace).
	Tools *tool.Registry
	// Workspace is the root of the file tools when Tools is nil.
	// Default "./workspace".
	Workspace string
	// Policy is the operator's approvals and limits (keel.yaml's approvals
	// and limits), applied on top of every run's own configuration: the
	// stricter approval wins and limits cap what runs ask for. Optional.
	Policy activities.Policy
	// Limits bound what callers send this worker's sessions: the sizes of
	// prompts, steering, answers and run configurations, the prompts
	// queued in a session and the steering staged in a run (keel.yaml's
	// limits; docs/contract.md §18). They apply in the workflows' update
	// validators, so they may change between deployments; signals always
	// apply the defaults. Optional: zero fields take the defaults of
	// api.Limits.
	Limits api.Limits
	// Agents are the named agents the worker offers (keel.yaml agents,
	// docs/contract.md §21.2), by name: a run may start as one
	// (api.RunConfig.Agent), and each agent that another may delegate to
	// gets its delegation tool (agent__NAME) in the worker's tools.
	// Optional.
	Agents map[string]AgentSpec
	// Delegation bounds how deep child sessions nest and how many a run
	// has running at once (keel.yaml limits delegation_depth and
	// delegation_fan_out). Optional: the defaults of DelegationLimits.
	Delegation DelegationLimits
	// Schedules bound the namespace's schedules and their firings
	// (keel.yaml limits schedules, schedules_per_prefix,
	// schedule_min_interval and schedule_sessions_per_hour;
	// docs/contract.md §22.11): create and each firing ask the
	// namespace's ScheduleRegistry with these. Optional: zero fields
	// take the defaults of ScheduleLimits.
	Schedules ScheduleLimits
	// Scorers are the worker's own scorers, which score every case of
	// every eval after the deterministic ones (docs/evals.md). Optional.
	Scorers []eval.Scorer
	// Hooks are the hooks the worker offers, by name (keel.yaml hooks,
	// docs/contract.md §23): a run names those it wants
	// (api.RunConfig.Hooks), and a send naming another is refused.
	// Optional.
	Hooks map[string]hook.Hook
	// Sinks receive every durable event of every session the worker runs,
	// at least once and in order (keel.yaml sinks, docs/contract.md
	// §23.6). Optional.
	Sinks map[string]hook.Sink
	// MCPServers are the MCP servers whose tools the worker offers to the
	// model as mcp__<server>__<tool> (keel.yaml's mcp_servers). New
	// connects them with mcp.Connect into the worker's tool registry,
	// within MCPConnectTimeout, and the worker closes them when it stops.
	// Optional.
	MCPServers []mcp.ServerConfig
	// Live receives ephemeral events (deltas). A channel that also carries
	// cancel notices (live.CancelNotices: NATS, Memory) is the fast path's
	// messenger: the worker sends a notice when its workflow code cancels
	// an activity, and reads a workflow's history only once a notice names
	// it (docs/contract.md §7.5). Default: none.
	Live live.Publisher
	// Logger receives what keel's activities and the fast path of
	// cancellation log; records about a run carry its session_id, run_id,
	// step and attempt. The Temporal SDK's own records go to the client's
	// logger: Dial gives the client this one (logging.Temporal), so both
	// reach one sink. Default logging.Default(): warnings on stderr.
	Logger *zap.Logger
	// HeartbeatInterval is how often a running activity heartbeats, and the
	// longest the SDK holds a heartbeat before sending it. Heartbeats serve
	// liveness (a worker that dies mid-turn is noticed after the run's
	// heartbeat timeout); cancellation takes the watch's fast path unless
	// NoCancelWatch. Each heartbeat is a write on the server and a billed
	// action on Temporal Cloud. Default DefaultHeartbeatInterval.
	HeartbeatInterval time.Duration
	// NoCancelWatch turns off the fast path of cancellation: the worker no
	// longer follows the history of workflows whose activities it runs,
	// and a cancellation reaches a running activity with a heartbeat
	// response, within about HeartbeatInterval.
	NoCancelWatch bool
	// MaxConcurrentActivities bounds the activities (model turns, tool
	// calls) this worker runs at once. Default DefaultMaxConcurrentActivities.
	MaxConcurrentActivities int
	// MaxConcurrentWorkflowTasks bounds the workflow tasks it runs at once.
	// Default DefaultMaxConcurrentWorkflowTasks.
	MaxConcurrentWorkflowTasks int
	// WorkflowPollers and ActivityPollers are how many long polls the
	// worker keeps open for each kind of task. Default
	// DefaultWorkflowPollers and DefaultActivityPollers.
	WorkflowPollers int
	ActivityPollers int
	// StickyCacheSize is how many workflow executions the worker keeps in
	// memory between their tasks; a session or run that falls out of it is
	// replayed from its history on its next task. It is a process-wide
	// setting of the Temporal SDK, applied when the first worker is
	// created. Default DefaultStickyCacheSize.
	StickyCacheSize int
	// StopTimeout is how long a stopping worker lets running activities
	// finish before cancelling them. Default 10 s.
	StopTimeout time.Duration
	// Worker overrides the Temporal worker options (task queue and the
	// fields above win).
	Worker sdkworker.Options
	// Codec is the content store's codec that the Temporal client's data
	// converter uses (store.NewDataConverter): large values (tool output,
	// transcripts, run results) go to the store and histories hold
	// references, and sessions move their older events there as segments.
	// Optional: without it every value stays in Temporal and a session
	// carries its whole event log when it continues as new, so its
	// length is bounded by Temporal's limits after all.
	Codec *store.Codec
	// DataConverter is the Temporal client's data converter, which the
	// worker's keel client (the firings of schedules send through it)
	// reads sessions with. Default: store.NewDataConverter(Codec), or
	// Temporal's without a Codec; with encryption and no store, set it
	// to the client's (package stack does).
	DataConverter converter.DataConverter
	// MetricsHandler receives the Temporal SDK's worker metrics and keel's
	// own (docs/observability.md). Dial gives it to the client; workflows
	// and activities record into their client's handler, so a worker whose
	// client you dial yourself needs client.Options.MetricsHandler set
	// (telemetry.Telemetry.ClientOptions does both). Optional: no metrics.
	MetricsHandler client.MetricsHandler
	// TracerProvider receives keel's spans of model turns and tool calls,
	// under the Temporal SDK's activity spans. Dial also puts the SDK's
	// OpenTelemetry tracing interceptor on the client, which the worker
	// inherits (give a client you dial yourself the interceptor, and the
	// worker no second one). Optional: no spans.
	TracerProvider trace.TracerProvider
	// Deployment and BuildID make the worker one version of a Worker
	// Deployment (deployment.go): runs stay on the build that started
	// them, sessions move to the current build. Set both or neither.
	// Default: an unversioned worker, which takes every task of the task
	// queue.
	Deployment string
	BuildID    string
}

// Defaults of Options; docs/performance.md has the measurements behind them.
// Pollers are above the SDK's 2 each: when hundreds of sessions start at
// once, workflow tasks wait for a poll, and a send waits for its session's
// first task (at 500 sessions, 16 workflow pollers took keel's run p50 from
// 2.88x to 1.91x the bare baseline's, and send p50 from 11.8 s to 8.3 s).
const (
	DefaultHeartbeatInterval          = activities.DefaultHeartbeatEvery
	DefaultMaxConcurrentActivities    = 1000
	DefaultMaxConcurrentWorkflowTasks = 1000
	DefaultWorkflowPollers            = 16
	DefaultActivityPollers            = 8
	DefaultStickyCacheSize            = 10000
)

var stickyOnce sync.Once

// New returns a worker for c with keel's workflows and activities
// registered. Start it with Run or Start.
func New(c client.Client, opts Options) (sdkworker.Worker, error) {
	deployment, err := deploymentOptions(opts)
	if err != nil {
		return nil, err
	}
	acts, err := NewActivities(c, opts)
	if err != nil {
		return nil, err
	}
	var servers *mcp.Servers
	if len(opts.MCPServers) > 0 {
		if servers, err = connectMCP(opts.MCPServers, acts.Tools, acts.Logger); err != nil {
			return nil, err
		}
	}
	opts = opts.withDefaults()
	wo := opts.Worker
	// Activities log through a logger derived from their input, which
	// carries the run's session_id, run_id, step and attempt.
	wo.Interceptors = append(slices.Clip(wo.Interceptors), activities.LogInterceptor(acts.Logger), &readOnlyQueries{})
	wo.MaxHeartbeatThrottleInterval = opts.HeartbeatInterval
	wo.DefaultHeartbeatThrottleInterval = opts.HeartbeatInterval
	wo.MaxConcurrentActivityExecutionSize = opts.MaxConcurrentActivities
	wo.MaxConcurrentWorkflowTaskExecutionSize = opts.MaxConcurrentWorkflowTasks
	wo.MaxConcurrentWorkflowTaskPollers = opts.WorkflowPollers
	wo.MaxConcurrentActivityTaskPollers = opts.ActivityPollers
	stickyOnce.Do(func() { sdkworker.SetStickyWorkflowCacheSize(opts.StickyCacheSize) })
	if opts.StopTimeout <= 0 {
		opts.StopTimeout = 10 * time.Second
	}
	wo.WorkerStopTimeout = opts.StopTimeout
	tq := opts.TaskQueue
	if tq == "" {
		tq = api.TaskQueue
	}
	if deployment.UseVersioning { // else keep what opts.Worker says
		wo.DeploymentOptions = deployment
	}
	var closers []func()
	if g, ok := acts.Rates.(*rateGate); ok {
		closers = append(closers, g.close)
	}
	if servers != nil {
		closers = append(closers, func() { _ = servers.Close() })
	}
	if cw, ok := acts.Cancels.(*cancelWatch); ok {
		if notices, ok := opts.Live.(live.CancelNotices); ok {
			// Cancellations of activities go out as notices, and notices
			// start the watch's reads (cancelWatch).
			stop, err := notices.OnCancel(cw.notice)
			if err != nil {
				for _, c := range closers {
					c()
				}
				return nil, fmt.Errorf("worker: listen for cancel notices: %w", err)
			}
			cw.noticed = true
			notifier, stopNotifier := newCancelNotifier(notices, acts.Logger)
			wo.Interceptors = append(wo.Interceptors, notifier)
			closers = append(closers, stop, stopNotifier)
		}
	}
	w := sdkworker.New(c, tq, wo)
	rules := opts.rules(acts.Models)
	RegisterWithRules(w, acts, rules)
	if c != nil {
		sched, err := newSchedules(c, opts, scheduleRulesOf(rules, opts.Schedules), acts.Tools)
		if err != nil {
			for _, c := range closers {
				c()
			}
			return nil, err
		}
		registerSchedules(w, sched)
		registerEvals(w, &evals{keel: sched.keel, scorers: opts.Scorers, ceiling: rules.RunBudget})
	}
	if len(closers) > 0 {
		return &closingWorker{Worker: w, closers: closers}, nil
	}
	return w, nil
}

// closingWorker is a worker that releases what it holds besides the SDK
// worker (MCP servers, the cancel notices' listener and sender) once it
// stopped.
type closingWorker struct {
	sdkworker.Worker
	closers []func()
	once    sync.Once
}

func (w *closingWorker) close() {
	w.once.Do(func() {
		for _, c := range w.closers {
			c()
		}
	})
}

// Stop stops the worker, then what it holds.
func (w *closingWorker) Stop() {
	w.Worker.Stop()
	w.close()
}

// Run runs the worker until interruptCh delivers, then releases what it
// holds.
func (w *closingWorker) Run(interruptCh <-chan interface{}) error {
	err := w.Worker.Run(interruptCh)
	w.close()
	return err
}

// withDefaults fills in what opts leaves unset.
func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = DefaultHeartbeatInterval
	}
	def(&o.MaxConcurrentActivities, DefaultMaxConcurrentActivities)
	def(&o.MaxConcurrentWorkflowTasks, DefaultMaxConcurrentWorkflowTasks)
	def(&o.WorkflowPollers, DefaultWorkflowPollers)
	def(&o.ActivityPollers, DefaultActivityPollers)
	def(&o.StickyCacheSize, DefaultStickyCacheSize)
	return o
}

// checkRateLimits checks the names and rates of a worker's rate limits
// (docs/contract.md §20.5).
func checkRateLimits(limits map[string]activities.RateLimit) error {
	for key, rl := range limits {
		if err := ratelimit.ValidateRateKey(key); err != nil {
			return fmt.Errorf("worker: %w", err)
		}
		if err := rl.Validate(); err != nil {
			return fmt.Errorf("worker: rate limit %q: %w", key, err)
		}
	}
	return nil
}

// NewActivities returns keel's activities configured from opts. Rate
// limits are shared with every worker through their RateLimit workflows
// (docs/contract.md §20.5), so they need a client.
func NewActivities(c client.Client, opts Options) (*activities.Activities, error) {
	opts = opts.withDefaults()
	if opts.Namespace == "" {
		opts.Namespace = "default"
	}
	models := opts.Models
	if models == nil {
		models = DefaultModels()
	}
	if m, ok := models.(*Models); ok {
		if err := CheckAllow(m.Allow); err != nil {
			return nil, fmt.Errorf("worker: %w", err)
		}
	}
	tools := opts.Tools
	if tools == nil {
		root := opts.Workspace
		if root == "" {
			root = "workspace"
		}
		var err error
		if tools, err = tool.Builtins(root); err != nil {
			return nil, fmt.Errorf("worker: tools: %w", err)
		}
	}
	logger := opts.Logger
	if logger == nil {
		logger = logging.Default()
	}
	if err := addAgentTools(tools, opts.Agents); err != nil {
		return nil, err
	}
	if err := checkHooks(opts.Hooks, opts.Agents); err != nil {
		return nil, err
	}
	acts := &activities.Activities{Models: models, Tools: tools, Live: opts.Live, Logger: logger,
		HeartbeatEvery: opts.HeartbeatInterval, Policy: opts.Policy,
		Agents: opts.Agents, Delegation: opts.Delegation, Hooks: opts.Hooks, Sinks: opts.Sinks,
		// A worker runs turns of at most this many sessions at once: the
		// transcript cache keeps each of them, so a turn after the first
		// never has to ask its run for the transcript (a query).
		CacheRuns: max(activities.DefaultCacheRuns, opts.MaxConcurrentActivities)}
	if opts.TracerProvider != nil {
		acts.Tracer = instrument.Tracer(opts.TracerProvider)
	}
	if opts.Codec != nil {
		acts.Segments = codecSegments{opts.Codec}
		acts.Attachments = codecAttachments{opts.Codec}
	}
	if err := checkRateLimits(opts.Policy.RateLimits); err != nil {
		return nil, err
	}
	if c == nil && len(opts.Policy.RateLimits) > 0 {
		return nil, errors.New("worker: rate limits are shared through Temporal and need a client")
	}
	if c != nil {
		tq := opts.TaskQueue
		if tq == "" {
			tq = api.TaskQueue
		}
		if len(opts.Policy.RateLimits) > 0 {
			acts.Rates = newRateGate(c, tq, acts.Logger)
		}
		acts.Runs = runReader{c: c}
		acts.Logs = sessionLogs{c: c, codec: opts.Codec}
		acts.Lifecycle = newLifecycle(c, opts.Namespace)
		if !opts.NoCancelWatch {
			acts.Cancels = newCancelWatch(c, acts.Logger)
		}
	}
	return acts, nil
}

// checkHooks refuses hooks a run could not name or the workflow could not
// call, and agents naming hooks the worker lacks.
func checkHooks(hooks map[string]hook.Hook, agents map[string]AgentSpec) error {
	for name, h := range hooks {
		if !api.ValidAgentName(name) {
			return fmt.Errorf("worker: hook %.40q: want 1 to %d letters, digits, '-' or '_', starting with a letter", name, api.MaxAgentNameBytes)
		}
		if h == nil {
			return fmt.Errorf("worker: hook %s is nil", name)
		}
		if err := h.Spec().Validate(); err != nil {
			return fmt.Errorf("worker: hook %s: %w", name, err)
		}
	}
	for name, a := range agents {
		for _, h := range a.Hooks {
			if _, ok := hooks[h]; !ok {
				return fmt.Errorf("worker: agent %s names hook %.40q, which the worker does not offer", name, h)
			}
		}
	}
	return nil
}
