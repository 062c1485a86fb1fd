package activities

import (
	"context"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/delegation"
	"github.com/keelrun/keel/internal/instrument"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/server/hook"
	"github.com/keelrun/keel/server/provider"
	"github.com/keelrun/keel/server/tool"
)

// ModelResolver turns a model spec into a provider and the model name to
// ask it for. Resolution happens on the worker, where the keys are.
type ModelResolver interface {
	Resolve(spec string) (provider.Provider, string, error)
}

// ModelLabeler is a ModelResolver that chooses the "model" label of a
// turn's metrics, from a bounded set (worker.Models does): a resolver
// that admits names clients invent must not add a metric series for each.
// Without it the label is the model name Resolve returned.
type ModelLabeler interface {
	ModelLabel(spec, model string) string
}

// RunReader reads a session's active run from Temporal: the transcript
// prefix a turn needs when the worker's cache does not hold it (after a
// restart, or when turns land on different workers).
type RunReader interface {
	Transcript(ctx context.Context, ref TranscriptRef) ([]keel.Message, error)
}

// DefaultHeartbeatEvery is the default Activities.HeartbeatEvery: a rate
// for liveness only (a dead worker is noticed after the run's heartbeat
// timeout, 15 s by default, whatever the rate). Cancellation does not wait
// for it when the activities have a CancelWatch (docs/contract.md §7.5).
const DefaultHeartbeatEvery = 5 * time.Second

// DefaultCacheRuns is the default Activities.CacheRuns.
const DefaultCacheRuns = 256

// CancelWatch tells a running activity that its workflow asked to cancel
// it, sooner than the next heartbeat would. It is a fast path only:
// Temporal delivers the same cancellation with a heartbeat regardless, so
// a watch that fails or lags makes cancellation slower, never lost.
type CancelWatch interface {
	// Watch returns a context derived from the activity context ctx that
	// is cancelled once the workflow's request to cancel this activity is
	// recorded, and a function to call when the activity returns.
	Watch(ctx context.Context) (context.Context, func())
}

// Activities holds what keel's activities need on a worker.
type Activities struct {
	Models    ModelResolver
	Tools     *tool.Registry
	Live      live.Publisher // Optional: deltas are dropped without it.
	Runs      RunReader      // Optional: without it a cache miss fails the turn.
	Lifecycle Lifecycle      // Optional: without it Shutdown fails.
	Segments  SegmentStore   // Optional: without it sessions keep their logs in memory.
	// Attachments reads the images and documents of messages for their
	// providers, and stores those tools return. Optional: without it a
	// turn whose transcript has one fails.
	Attachments AttachmentStore
	// Hooks are the hooks the worker offers, by name (docs/contract.md
	// §23). Optional.
	Hooks  map[string]hook.Hook
	Logger *zap.Logger // Optional: default logging.Default().
	// CacheRuns bounds the transcript cache, which keeps the latest run's
	// transcript of each session. A turn whose session fell out of it asks
	// its run for the transcript (a query). Optional; default
	// DefaultCacheRuns sessions (keel's worker sizes it to the activities
	// it runs at once).
	CacheRuns int
	// Cancels is the fast path of cancellation. Optional: without it an
	// activity learns of its cancellation from a heartbeat response.
	Cancels CancelWatch
	// HeartbeatEvery is how often a running activity heartbeats with
	// nothing else to report (streamed chunks heartbeat too, within the
	// worker's throttle). Optional; default DefaultHeartbeatEvery.
	HeartbeatEvery time.Duration
	// Tracer starts the spans of model turns and tool calls. Optional:
	// without it there are none.
	Tracer trace.Tracer
	// Policy is the worker's approvals and limits, applied on top of each
	// run's configuration. Optional.
	Policy Policy
	// Agents are the agents the worker defines (keel.yaml agents), by
	// name: a model turn that calls agent__NAME records NAME's spec for
	// the delegation (docs/contract.md §21.3). Optional.
	Agents map[string]delegation.AgentSpec
	// Delegation is the worker's limits of delegation. Optional: the
	// defaults of delegation.DelegationLimits.
	Delegation delegation.DelegationLimits
	// Rates keeps Policy.RateLimits across every worker (docs/contract.md
	// §20.5). Optional without rate limits; with them, a model turn fails
	// without it.
	Rates RateGate
	// Sinks are the worker's event sinks, by name (docs/contract.md
	// §23.6), and Logs how DeliverEvents reads the logs it delivers.
	// Optional: without them a session's deliveries fail as not offered.
	Sinks map[string]hook.Sink
	Logs  SessionLog

	cache       *transcriptCache
	slots       slots
	attachments attachmentCache
	sinkList    sync.Once
	sinkSorted  []string
}

// publish sends an ephemeral event; failures are logged, never fatal: the
// durable log is the source of truth.
func (a *Activities) publish(ctx context.Context, sessionID, runID string, afterSeq int64, ev keel.Event) {
	a.publishRelayed(ctx, sessionID, runID, afterSeq, ev, nil)
}

// publishRelayed is publish, then the same event copied to each relay
// target: a child session's ancestors, each with the child's path there
// (docs/contract.md §21.4).
func (a *Activities) publishRelayed(ctx context.Context, sessionID, runID string, afterSeq int64, ev keel.Event, relay []api.RelayTarget) {
	if a.Live == nil {
		return
	}
	env, err := keel.Seal(ev, sessionID, runID, time.Now())
	if err != nil {
		return
	}
	env.AfterSeq = afterSeq
	a.send(ctx, env)
	for _, r := range relay {
		env.SessionID, env.RunID, env.AfterSeq, env.Path = r.SessionID, r.RunID, r.AfterSeq, r.Path
		a.send(ctx, env)
	}
}

func (a *Activities) send(ctx context.Context, env keel.Envelope) {
	if err := a.Live.Publish(ctx, env); err != nil {
		a.log(ctx).Debug("live publish failed", zap.String("type", env.Type), zap.Error(err))
		instrument.LivePublishFailed(activity.GetMetricsHandler(ctx))
	}
}

// heartbeater records an activity's heartbeats from its own goroutine, on
// a ticker, so that a worker that dies under a slow provider or tool is
// noticed: one a HeartbeatEvery and no more, whatever the activity does
// (streamed chunks do not heartbeat; cancellation does not need them). The
// SDK sends a heartbeat synchronously to the server; doing it here keeps
// that round trip off the stream.
type heartbeater struct {
	stop    context.CancelFunc
	done    chan struct{}
	release func()
}

// begin starts what every long activity runs beside its work: heartbeats,
// and the cancellation watch. The activity works under the returned
// context and calls Stop on the heartbeater when it returns.
func (a *Activities) begin(ctx context.Context) (context.Context, *heartbeater) {
	return a.beginWith(ctx, nil)
}

// beginWith is begin whose heartbeats carry details() (progress a retried
// attempt resumes from): a heartbeat without details would erase it.
func (a *Activities) beginWith(ctx context.Context, details func() any) (context.Context, *heartbeater) {
	release := func() {}
	wctx := ctx
	if a.Cancels != nil {
		wctx, release = a.Cancels.Watch(ctx)
	}
	every := a.HeartbeatEvery
	if every <= 0 {
		every = DefaultHeartbeatEvery
	}
	// At least two heartbeats per heartbeat timeout, so that a run with a
	// short one is not timed out by a live worker.
	if timeout := activity.GetInfo(ctx).HeartbeatTimeout; timeout > 0 && every > timeout/2 {
		every = timeout / 2
	}
	hctx, stop := context.WithCancel(ctx)
	h := &heartbeater{stop: stop, done: make(chan struct{}), release: release}
	go func() {
		defer close(h.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-hctx.Done():
				return
			case <-t.C:
			}
			if hctx.Err() != nil {
				return // stopped as the tick came: select picked either
			}
			if details != nil {
				activity.RecordHeartbeat(ctx, details())
			} else {
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	return wctx, h
}

// Stop ends the heartbeats and waits for one in flight (the activity's
// context must not be used once the activity has returned), and releases
// the cancellation watch.
func (h *heartbeater) Stop() {
	h.stop()
	<-h.done
	h.release()
}

func truncateOutput(s string) string {
	if len(s) <= MaxToolOutput {
		return s
	}
	cut := MaxToolOutput
	for cut > 0 && s[cut]&0xC0 == 0x80 { // keep UTF-8 whole
		cut--
	}
	return s[:cut] + "\n[output truncated: " + strconv.Itoa(len(s)-cut) + " more bytes]"
}
