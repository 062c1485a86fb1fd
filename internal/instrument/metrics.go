// Package instrument names keel's own metrics and spans and records them:
// metrics through the Temporal SDK's metrics handler (in workflow code the
// handler of workflow.GetMetricsHandler, which records nothing while a
// workflow replays; in activities activity.GetMetricsHandler's), spans
// through OpenTelemetry's trace API. Package telemetry exports both.
// docs/observability.md lists every name with its labels.
package instrument

import (
	"time"

	"go.temporal.io/sdk/client"

	"github.com/keelrun/keel"
)

// Metric names, in Prometheus form: the unit ends the name, counters end
// in _total. Labels are listed beside each; the SDK's handlers add
// namespace, task_queue and workflow_type (and activity_type in
// activities) to what a workflow or activity records.
const (
	// RunsTotal counts finished runs; label outcome (completed, failed,
	// cancelled). Recorded by the session at the run's terminal commit.
	RunsTotal = "keel_runs_total"
	// RunDuration is a run's time from start to terminal commit, by outcome.
	RunDuration = "keel_run_duration_seconds"
	// ModelRetriesTotal counts retried model requests; label kind (the
	// provider failure's kind, or malformed). Recorded in workflow code.
	ModelRetriesTotal = "keel_model_retries_total"
	// HostInputWait is how long a tool's question waited for the host;
	// label outcome (answered, interrupted). Recorded in workflow code.
	HostInputWait = "keel_host_input_wait_seconds"
	// ModelTurnDuration is one provider request's time, streaming
	// included; labels provider, model, outcome (ok, error, cancelled).
	ModelTurnDuration = "keel_model_turn_duration_seconds"
	// ModelTimeToFirstToken is the time from a request to its first text,
	// reasoning or tool-call chunk; labels provider, model.
	ModelTimeToFirstToken = "keel_model_time_to_first_token_seconds"
	// ModelInputTokens and ModelOutputTokens count the tokens providers
	// reported, failed attempts included; labels provider, model.
	ModelInputTokens  = "keel_model_input_tokens_total"
	ModelOutputTokens = "keel_model_output_tokens_total"
	// CostTotal counts what provider requests cost by the worker's price
	// table, failed attempts included, in nanos (billionths) of the
	// currency: divide by 1e9 for units. Labels provider, model,
	// currency. Requests without a price are not counted here.
	CostTotal = "keel_cost_total"
	// ToolCallsTotal counts finished tool calls by tool and status (ok,
	// error, unavailable, interrupted). Recorded in workflow code, which
	// runs some tools itself (ask_user, sleep).
	ToolCallsTotal = "keel_tool_calls_total"
	// ToolCallDuration is a tool call's time; labels tool, status.
	ToolCallDuration = "keel_tool_call_duration_seconds"
	// LiveDeliveryLag is the time from an ephemeral event's creation on
	// the worker to its delivery to a live subscriber.
	LiveDeliveryLag = "keel_live_delivery_lag_seconds"
	// LiveMissedEventsTotal counts ephemeral events live subscribers lost
	// by falling behind (each *live.LaggedError's Missed).
	LiveMissedEventsTotal = "keel_live_missed_events_total"
	// LivePublishFailuresTotal counts ephemeral events a worker could not
	// publish to the live channel.
	LivePublishFailuresTotal = "keel_live_publish_failures_total"
	// LiveRejectedMessagesTotal counts messages a live subscriber dropped
	// because they failed its checks (forged, malformed, plaintext on an
	// encrypted channel); label reason (live.Reason).
	LiveRejectedMessagesTotal = "keel_live_rejected_messages_total"
	// ScheduleFiringsRefusedTotal counts schedule firings a limit
	// refused (docs/contract.md §22.11); label reason (interval,
	// sessions). Recorded by the SendScheduled activity.
	ScheduleFiringsRefusedTotal = "keel_schedule_firings_refused_total"
	// SinkLag is the time from a durable event (its at, the workflow's
	// clock) to its delivery to an event sink (docs/contract.md §23.6);
	// label sink. SinkEventsTotal counts the events delivered, repeats
	// included, and SinkFailuresTotal the deliveries that failed; label
	// sink. Recorded by the DeliverEvents activity.
	SinkLag           = "keel_sink_lag_seconds"
	SinkEventsTotal   = "keel_sink_delivered_events_total"
	SinkFailuresTotal = "keel_sink_failed_deliveries_total"
)

// RunFinished records a run's terminal commit.
func RunFinished(h client.MetricsHandler, outcome string, took time.Duration) {
	h = h.WithTags(map[string]string{"outcome": outcome})
	h.Counter(RunsTotal).Inc(1)
	h.Timer(RunDuration).Record(took)
}

// ModelRetry records a model request the run retries after a failure of
// the given kind.
func ModelRetry(h client.MetricsHandler, kind string) {
	h.WithTags(map[string]string{"kind": kind}).Counter(ModelRetriesTotal).Inc(1)
}

// HostInputWaited records how long a question waited for its answer.
func HostInputWaited(h client.MetricsHandler, answered bool, took time.Duration) {
	outcome := "interrupted"
	if answered {
		outcome = "answered"
	}
	h.WithTags(map[string]string{"outcome": outcome}).Timer(HostInputWait).Record(took)
}

// ModelTurn is what one provider request cost.
type ModelTurn struct {
	Provider, Model string
	// Outcome is ok, error or cancelled.
	Outcome                   string
	Took                      time.Duration
	FirstToken                time.Duration // zero: no token came
	InputTokens, OutputTokens int64
	// Cost is the request's cost, one entry per currency.
	Cost keel.Costs
}

// ModelTurnDone records a provider request.
func ModelTurnDone(h client.MetricsHandler, t ModelTurn) {
	h = h.WithTags(map[string]string{"provider": t.Provider, "model": t.Model})
	h.WithTags(map[string]string{"outcome": t.Outcome}).Timer(ModelTurnDuration).Record(t.Took)
	if t.FirstToken > 0 {
		h.Timer(ModelTimeToFirstToken).Record(t.FirstToken)
	}
	if t.InputTokens > 0 {
		h.Counter(ModelInputTokens).Inc(t.InputTokens)
	}
	if t.OutputTokens > 0 {
		h.Counter(ModelOutputTokens).Inc(t.OutputTokens)
	}
	for _, c := range t.Cost {
		if c.Nanos > 0 {
			h.WithTags(map[string]string{"currency": c.Currency}).Counter(CostTotal).Inc(c.Nanos)
		}
	}
}

// ToolCallDone records a tool call.
func ToolCallDone(h client.MetricsHandler, tool, status string, took time.Duration) {
	h = h.WithTags(map[string]string{"tool": tool, "status": status})
	h.Counter(ToolCallsTotal).Inc(1)
	h.Timer(ToolCallDuration).Record(took)
}

// LivePublishFailed records an ephemeral event that was not published.
func LivePublishFailed(h client.MetricsHandler) {
	h.Counter(LivePublishFailuresTotal).Inc(1)
}

// ScheduleFiringRefused records a schedule's firing that a limit refused,
// for reason (schedreg.RefusedInterval, schedreg.RefusedSessions).
func ScheduleFiringRefused(h client.MetricsHandler, reason string) {
	h.WithTags(map[string]string{"reason": reason}).Counter(ScheduleFiringsRefusedTotal).Inc(1)
}

// SinkDelivered records events delivered to sink at now: their count and
// each one's lag.
func SinkDelivered(h client.MetricsHandler, sink string, events []keel.Envelope, now time.Time) {
	h = h.WithTags(map[string]string{"sink": sink})
	lag := h.Timer(SinkLag)
	for _, ev := range events {
		lag.Record(now.Sub(ev.At))
	}
	h.Counter(SinkEventsTotal).Inc(int64(len(events)))
}

// SinkFailed records a delivery to sink that failed.
func SinkFailed(h client.MetricsHandler, sink string) {
	h.WithTags(map[string]string{"sink": sink}).Counter(SinkFailuresTotal).Inc(1)
}
