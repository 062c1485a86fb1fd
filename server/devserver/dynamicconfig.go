package devserver

import (
	"maps"
	"time"

	"go.temporal.io/server/common/dynamicconfig"
)

// TunedDynamicConfig returns the dynamic config keel's dev server runs with
// unless Config.Untuned is set. docs/devserver.md has the measurements
// behind every value; the reasons in short:
func TunedDynamicConfig() map[string]any {
	return map[string]any{
		// Every history task queue reader (transfer: dispatch of workflow and
		// activity tasks; timer; visibility; outbound) loads new tasks at most
		// MaxPollRPS times a second per shard, from a token bucket as deep as
		// the rate. With the stock 20, once the first 20 loads after a pause
		// are spent, every back-to-back step of a run waits 50 ms for its
		// workflow task. At 1000 the wait is under a millisecond. The limiter
		// only delays loads that a new task triggers, so a high limit costs
		// nothing when idle.
		dynamicconfig.TransferProcessorMaxPollRPS.Key().String():   1000,
		dynamicconfig.TimerProcessorMaxPollRPS.Key().String():      1000,
		dynamicconfig.VisibilityProcessorMaxPollRPS.Key().String(): 1000,
		dynamicconfig.OutboundProcessorMaxPollRPS.Key().String():   1000,

		// Activities scheduled on the workflow's own task queue start in the
		// response to the workflow task that scheduled them, skipping a trip
		// through the transfer queue and matching. Already the default in
		// server 1.32; pinned because keel's step latency relies on it.
		dynamicconfig.EnableActivityEagerExecution.Key().String(): true,

		// Task queue partitions stay at the stock 4: one partition measured
		// no different, for one run or fifty concurrent ones, beyond the
		// noise between benchmark runs.

		// A history long poll (how clients wait for a workflow's result and
		// how keel's subscribers hear of new events) can miss its wake-up:
		// the server keeps one pending notification per poller and drops
		// the next while it is full, so a poller that took an older one
		// waits for the expiry. Measured in BenchmarkLongSession: one or
		// two of 1,000 run outcomes waited the stock 20 s. Polls that expire
		// after 2 s bound that wait; an idle poller re-polls every 2 s.
		dynamicconfig.HistoryLongPollExpirationInterval.Key().String(): 2 * time.Second,

		// The Web UI and keel's list commands query visibility often.
		dynamicconfig.FrontendMaxNamespaceVisibilityRPSPerInstance.Key().String(): 100,
	}
}

// lifecycleDynamicConfig is applied tuned or not: it is about stopping
// cleanly, not speed. The server starts these system workers and never stops
// them (upstream TODOs in service/worker/scanner), so after Stop they would
// keep polling, and after a restart on the same port poll the new server.
// Scanners only reclaim space in a long-running cluster; with the parent
// close policy worker off, history applies parent close policies itself.
func lifecycleDynamicConfig() map[string]any {
	return map[string]any{
		dynamicconfig.TaskQueueScannerEnabled.Key().String():       false,
		dynamicconfig.HistoryScannerEnabled.Key().String():         false,
		dynamicconfig.ExecutionsScannerEnabled.Key().String():      false,
		dynamicconfig.BuildIdScavengerEnabled.Key().String():       false,
		dynamicconfig.EnableParentClosePolicyWorker.Key().String(): false,
	}
}

// dynamicConfigFor builds the server's dynamic config client: the lifecycle
// settings, keel's tuning unless cfg.Untuned, then cfg.DynamicConfig on top.
func dynamicConfigFor(cfg Config) dynamicconfig.StaticClient {
	values := lifecycleDynamicConfig()
	if !cfg.Untuned {
		maps.Copy(values, TunedDynamicConfig())
	}
	maps.Copy(values, cfg.DynamicConfig)
	client := make(dynamicconfig.StaticClient, len(values))
	for k, v := range values {
		client[dynamicconfig.MakeKey(k)] = v
	}
	return client
}
