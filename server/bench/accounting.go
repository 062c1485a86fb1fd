package bench

import (
	"context"
	"maps"
	"path"
	"strings"
	"sync"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/metrics"
	"go.temporal.io/server/common/primitives"
	"go.temporal.io/server/common/tasktoken"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"

	"github.com/keelrun/keel/server/devserver"
)

// Counts are counters by name: frontend calls by method, persistence
// requests by operation, billable actions by type, server warnings by
// message.
type Counts map[string]int64

// Sub returns c minus before, dropping names that did not move.
func (c Counts) Sub(before Counts) Counts {
	out := Counts{}
	for k, v := range c {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// Total is the sum of all counters.
func (c Counts) Total() int64 {
	var sum int64
	for _, v := range c {
		sum += v
	}
	return sum
}

// Matching is the sum of the counters whose name keep accepts.
func (c Counts) Matching(keep func(string) bool) int64 {
	var sum int64
	for k, v := range c {
		if keep(k) {
			sum += v
		}
	}
	return sum
}

// counter is a concurrency-safe Counts.
type counter struct {
	mu sync.Mutex
	m  Counts
}

func (c *counter) add(name string, n int64) {
	c.mu.Lock()
	if c.m == nil {
		c.m = Counts{}
	}
	c.m[name] += n
	c.mu.Unlock()
}

func (c *counter) snapshot() Counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.m)
}

// ServerCounters count what an embedded server does, seen from inside it:
// every call its frontend serves, by method (workers' calls included, so
// heartbeats and workflow task completions are counted where they land),
// its persistence requests by operation, its billable actions by type, and
// its warnings by message. Install Interceptor, MetricsHandler and Logger
// in the devserver.Config.
type ServerCounters struct {
	rpcs, heartbeats, persistence, actions, warnings counter

	mu    sync.Mutex
	times map[string]Latencies // frontend call times by method, since TakeTimes
}

// TakeTimes returns how long the frontend took to answer each call since
// the last TakeTimes, by method, and starts again. Long polls
// (PollWorkflowTaskQueue, GetWorkflowExecutionHistory waiting for an
// event) take as long as they wait.
func (s *ServerCounters) TakeTimes() map[string]Latencies {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.times
	s.times = nil
	return t
}

func (s *ServerCounters) timed(method string, d time.Duration) {
	s.mu.Lock()
	if s.times == nil {
		s.times = map[string]Latencies{}
	}
	s.times[method] = append(s.times[method], d)
	s.mu.Unlock()
}

// ServerSnapshot is what ServerCounters counted up to a moment.
type ServerSnapshot struct {
	// RPCs are frontend calls by method ("RecordActivityTaskHeartbeat").
	// A poll that returned a task also counts under "<method> (task)".
	RPCs Counts
	// Heartbeats are activity heartbeats by activity type, read from the
	// task token ("by ID" for heartbeats sent by activity ID).
	Heartbeats Counts
	// Persistence are persistence requests by operation
	// ("UpdateWorkflowExecution"); visibility's are prefixed "visibility ".
	Persistence Counts
	// Actions are billable actions by type, as the server's own `action`
	// counter counts them (the frontend's telemetry interceptor, by its
	// action_type tag): "grpc_StartWorkflowExecution",
	// "command_ScheduleActivityTask", a child start as
	// "command_StartChildWorkflowExecution" and its
	// "..._Extra" (a child counts twice), "command_BatchMarkers" once per
	// workflow task with markers, "message_UpdateWorkflowExecution:Acceptance",
	// "grpc_RecordActivityTaskHeartbeat". Only the measured namespaces':
	// the server's own system workflows (temporal-system) are not a run's.
	Actions Counts
	// Warnings are the server's log records at warning level or above, by
	// message ("Slow gRPC call").
	Warnings Counts
}

// Sub returns what was counted between before and s.
func (s ServerSnapshot) Sub(before ServerSnapshot) ServerSnapshot {
	return ServerSnapshot{
		RPCs: s.RPCs.Sub(before.RPCs), Heartbeats: s.Heartbeats.Sub(before.Heartbeats),
		Persistence: s.Persistence.Sub(before.Persistence), Actions: s.Actions.Sub(before.Actions),
		Warnings: s.Warnings.Sub(before.Warnings),
	}
}

// Snapshot returns the counts so far.
func (s *ServerCounters) Snapshot() ServerSnapshot {
	return ServerSnapshot{RPCs: s.rpcs.snapshot(), Heartbeats: s.heartbeats.snapshot(),
		Persistence: s.persistence.snapshot(), Actions: s.actions.snapshot(), Warnings: s.warnings.snapshot()}
}

// Interceptor counts the frontend's calls by method.
func (s *ServerCounters) Interceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		method := path.Base(info.FullMethod)
		s.rpcs.add(method, 1)
		switch r := req.(type) {
		case *workflowservice.RecordActivityTaskHeartbeatRequest:
			activityType := "unknown"
			if t, err := taskTokens.Deserialize(r.GetTaskToken()); err == nil && t.GetActivityType() != "" {
				activityType = t.GetActivityType()
			}
			s.heartbeats.add(activityType, 1)
		case *workflowservice.RecordActivityTaskHeartbeatByIdRequest:
			s.heartbeats.add("by ID", 1)
		}
		t0 := time.Now()
		resp, err := handler(ctx, req)
		s.timed(method, time.Since(t0))
		if t, ok := resp.(interface{ GetTaskToken() []byte }); ok && err == nil && len(t.GetTaskToken()) > 0 {
			s.rpcs.add(method+" (task)", 1)
		}
		return resp, err
	}
}

// ClientInterceptor counts a client's calls by method, as
// ServerCounters.Interceptor counts them in the server; install it with
// grpc.WithChainUnaryInterceptor in the client's
// ConnectionOptions.DialOptions.
func ClientInterceptor(c *ClientCounter) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		c.c.add(path.Base(method), 1)
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

// ClientCounter counts a client's calls (ClientInterceptor).
type ClientCounter struct{ c counter }

// Snapshot returns the counts so far.
func (c *ClientCounter) Snapshot() Counts { return c.c.snapshot() }

// taskTokens reads the activity type of a heartbeat's task token.
var taskTokens = tasktoken.NewSerializer()

// MetricsHandler counts the server's persistence requests by operation and
// its billable actions by type, and drops every other metric.
func (s *ServerCounters) MetricsHandler() metrics.Handler {
	return serverMetrics{persistence: &s.persistence, actions: &s.actions}
}

// Logger passes the server's records at warning level or above to next
// (nil: nowhere) and counts them by message.
func (s *ServerCounters) Logger(next *zap.Logger) *zap.Logger {
	core := zapcore.NewNopCore()
	if next != nil {
		core = next.Core()
	}
	return zap.New(warningCounter{c: &s.warnings, next: core})
}

// Metric names and the tags serverMetrics reads. The server's tag keys
// for namespaces and action types are unexported: read them off its own
// tag constructors.
const (
	persistenceRequests           = "persistence_requests"
	visibilityPersistenceRequests = "visibility_persistence_requests"
)

var (
	actionMetric  = metrics.ActionCounter.Name()
	actionTypeKey = metrics.ActionType("").Key
	namespaceKey  = metrics.NamespaceTag("").Key
)

// serverMetrics is a metrics.Handler that keeps only the operation and
// namespace tags and counts only persistence requests and billable
// actions. The server calls WithTags on hot paths, so it stays a small
// value.
type serverMetrics struct {
	persistence, actions *counter
	op, namespace        string
}

var _ metrics.Handler = serverMetrics{}

func (h serverMetrics) WithTags(tags ...metrics.Tag) metrics.Handler {
	h.op = tagValue(tags, metrics.OperationTagName, h.op)
	h.namespace = tagValue(tags, namespaceKey, h.namespace)
	return h
}

// tagValue is the value of the last tag named key, else def.
func tagValue(tags []metrics.Tag, key, def string) string {
	for _, t := range tags {
		if t.Key == key {
			def = t.Value
		}
	}
	return def
}

func (h serverMetrics) Counter(name string) metrics.CounterIface {
	prefix := ""
	switch name {
	case persistenceRequests:
	case visibilityPersistenceRequests:
		prefix = "visibility "
	case actionMetric:
		return metrics.CounterFunc(func(n int64, tags ...metrics.Tag) {
			if tagValue(tags, namespaceKey, h.namespace) != primitives.SystemLocalNamespace {
				h.actions.add(tagValue(tags, actionTypeKey, "unknown"), n)
			}
		})
	default:
		return metrics.NoopCounterMetricFunc
	}
	return metrics.CounterFunc(func(n int64, tags ...metrics.Tag) {
		h.persistence.add(prefix+tagValue(tags, metrics.OperationTagName, h.op), n)
	})
}

func (serverMetrics) Gauge(string) metrics.GaugeIface { return metrics.NoopGaugeMetricFunc }
func (serverMetrics) Timer(string) metrics.TimerIface { return metrics.NoopTimerMetricFunc }
func (serverMetrics) Histogram(string, metrics.MetricUnit) metrics.HistogramIface {
	return metrics.NoopHistogramMetricFunc
}
func (serverMetrics) Stop(log.Logger) {}
func (h serverMetrics) StartBatch(string) metrics.BatchHandler {
	return serverBatch{h}
}

type serverBatch struct{ serverMetrics }

func (serverBatch) Close() error { return nil }

// PersistenceWrite reports whether a persistence operation writes: every
// operation but those that get, list, read, scan, count or check.
func PersistenceWrite(op string) bool {
	op = strings.TrimPrefix(op, "visibility ")
	for _, read := range []string{"Get", "List", "Read", "Scan", "Count", "Is", "Describe"} {
		if strings.HasPrefix(op, read) {
			return false
		}
	}
	return op != ""
}

// warningCounter counts records at warning level and above by message.
type warningCounter struct {
	c    *counter
	next zapcore.Core
}

func (h warningCounter) Enabled(l zapcore.Level) bool { return l >= zapcore.WarnLevel }

func (h warningCounter) With(fields []zapcore.Field) zapcore.Core {
	return warningCounter{c: h.c, next: h.next.With(fields)}
}

func (h warningCounter) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if h.Enabled(e.Level) {
		return ce.AddCore(e, h)
	}
	return ce
}

func (h warningCounter) Write(e zapcore.Entry, fields []zapcore.Field) error {
	h.c.add(e.Message, 1)
	if h.next.Enabled(e.Level) {
		return h.next.Write(e, fields)
	}
	return nil
}

func (h warningCounter) Sync() error { return h.next.Sync() }

// startCounted starts an in-memory server tuned as keel dev's whose
// requests and billable actions c counts, logging errors only.
func startCounted(ctx context.Context, c *ServerCounters) (*devserver.Server, error) {
	return devserver.Start(ctx, devserver.Config{Port: devserver.AnyPort, DisableUI: true,
		Logger: c.Logger(zap.NewNop()), LogLevel: zapcore.ErrorLevel,
		FrontendInterceptors: []grpc.UnaryServerInterceptor{c.Interceptor()},
		MetricsHandler:       c.MetricsHandler()})
}
