package keel

import "encoding/json"

// Wire names of the event types.
const (
	TypeRunStarted   = "run.started"
	TypeStepStarted  = "step.started"
	TypeRunCompleted = "run.completed"
	TypeRunCancelled = "run.cancelled"
	TypeRunFailed    = "run.failed"

	TypeUsageUpdated        = "usage.updated"
	TypeModelCallCompleted  = "model_call.completed"
	TypeProviderStreamReset = "provider.stream_reset"
	TypeProviderRetry       = "provider.request_retry"
	TypeHostedToolActivity  = "hosted_tool.activity"

	TypeToolProposed = "tool.proposed"
	TypeToolStarted  = "tool.started"
	TypeToolFinished = "tool.finished"
	TypeToolDetached = "tool.detached"

	TypeSteeringAccepted  = "steering.accepted"
	TypeSteeringApplied   = "steering.applied"
	TypeSteeringRetracted = "steering.retracted"

	TypeHostInputRequested = "host_input.requested"
	TypeHostInputResolved  = "host_input.resolved"

	TypeCompactionStarted   = "compaction.started"
	TypeCompactionCompleted = "compaction.completed"

	// Ephemeral.
	TypeTextDelta      = "text.delta"
	TypeReasoningDelta = "reasoning.delta"
	TypeToolCallDelta  = "tool_call.delta"
	TypeToolProgress   = "tool.progress"
)

// init registers every type for Envelope.Event, in the groups the types
// below follow: the run, the model turn, tool calls, steering, host input
// and compaction (docs/contract.md §1.3 and §1.4).
func init() {
	register[RunStarted](TypeRunStarted)
	register[StepStarted](TypeStepStarted)
	register[RunCompleted](TypeRunCompleted)
	register[RunCancelled](TypeRunCancelled)
	register[RunFailed](TypeRunFailed)

	register[UsageUpdated](TypeUsageUpdated)
	register[ModelCallCompleted](TypeModelCallCompleted)
	register[ProviderStreamReset](TypeProviderStreamReset)
	register[ProviderRequestRetry](TypeProviderRetry)
	register[HostedToolActivity](TypeHostedToolActivity)

	register[ToolProposed](TypeToolProposed)
	register[ToolStarted](TypeToolStarted)
	register[ToolFinished](TypeToolFinished)
	register[ToolDetached](TypeToolDetached)

	register[SteeringAccepted](TypeSteeringAccepted)
	register[SteeringApplied](TypeSteeringApplied)
	register[SteeringRetracted](TypeSteeringRetracted)

	register[HostInputRequested](TypeHostInputRequested)
	register[HostInputResolved](TypeHostInputResolved)

	register[CompactionStarted](TypeCompactionStarted)
	register[CompactionCompleted](TypeCompactionCompleted)

	register[TextDelta](TypeTextDelta)
	register[ReasoningDelta](TypeReasoningDelta)
	register[ToolCallDelta](TypeToolCallDelta)
	register[ToolProgress](TypeToolProgress)
}

// The run: its first event, one per step, and exactly one of the three
// terminal events.

// RunStarted is the first event of every run.
type RunStarted struct {
	Number   int    `json:"number"`
	Revision int64  `json:"revision"`
	Prompt   string `json:"prompt"`
	Model    string `json:"model"`
	// Agent is the agent the run runs as (docs/contract.md §21.2), if any.
	Agent string `json:"agent,omitempty"`
}

// StepStarted comes before each model turn. EstimatedContextTokens is a
// provider-neutral estimate of the request (history and tool schemas), for
// display until UsageUpdated reports the provider's count.
type StepStarted struct {
	Step                   int `json:"step"`
	EstimatedContextTokens int `json:"estimated_context_tokens"`
}

// RunCompleted ends a run that finished its turn. Answer is the final
// answer as JSON when the run set an output schema (Outcome.Answer).
type RunCompleted struct {
	Revision int64           `json:"revision"`
	Text     string          `json:"text"`
	Steps    int             `json:"steps"`
	Usage    Usage           `json:"usage"`
	Answer   json.RawMessage `json:"answer,omitempty"`
	// UsageTotal is what the run spent, abandoned attempts included, as
	// its outcome's usage_total (docs/contract.md §20.2).
	UsageTotal *Usage `json:"usage_total,omitempty"`
}

// RunCancelled ends a cancelled run.
type RunCancelled struct {
	Revision int64 `json:"revision"`
	// UsageTotal is what the run spent (RunCompleted.UsageTotal).
	UsageTotal *Usage `json:"usage_total,omitempty"`
}

// RunFailed ends a failed run. Message is sanitized.
type RunFailed struct {
	Code      Code   `json:"code"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
	Revision  int64  `json:"revision"`
	// UsageTotal is what the run spent (RunCompleted.UsageTotal).
	UsageTotal *Usage `json:"usage_total,omitempty"`
}

func (RunStarted) EventType() string   { return TypeRunStarted }
func (StepStarted) EventType() string  { return TypeStepStarted }
func (RunCompleted) EventType() string { return TypeRunCompleted }
func (RunCancelled) EventType() string { return TypeRunCancelled }
func (RunFailed) EventType() string    { return TypeRunFailed }

// The model turn: usage and metrics of each provider request, the reset and
// retry of an abandoned attempt, and the ephemeral deltas of the stream.

// UsageUpdated reports the usage of one physical provider request and the
// run's running total. Abandoned attempts are reported too.
type UsageUpdated struct {
	Step    int   `json:"step"`
	Attempt int   `json:"attempt"`
	Usage   Usage `json:"usage"`
	Total   Usage `json:"total"`
}

// GenerationTokens is the generation-window output token count: "reported"
// with N, "unavailable" (do not fall back to the aggregate), or "none" (the
// aggregate output count may be used).
type GenerationTokens struct {
	Kind string `json:"kind"`
	N    int64  `json:"n,omitempty"`
}

// The kinds of GenerationTokens.
const (
	GenerationReported    = "reported"
	GenerationUnavailable = "unavailable"
	GenerationNone        = "none"
)

// ModelCallMetrics describes one successful model call.
type ModelCallMetrics struct {
	Model                  string           `json:"model"`
	Provider               string           `json:"provider"`
	Duration               Duration         `json:"duration"`
	TimeToFirstToken       Duration         `json:"time_to_first_token"`
	InputTokens            int64            `json:"input_tokens"`
	OutputTokens           int64            `json:"output_tokens"`
	GenerationOutputTokens GenerationTokens `json:"generation_output_tokens"`
	FinishReason           string           `json:"finish_reason"`
}

// ModelCallCompleted follows each successful model turn.
type ModelCallCompleted struct {
	Step    int              `json:"step"`
	Attempt int              `json:"attempt"`
	Metrics ModelCallMetrics `json:"metrics"`
}

// ResetReason says why an attempt's output was abandoned: Kind "malformed"
// or "retryable_failure" (with Failure and, when the provider sent one,
// RetryAfter).
type ResetReason struct {
	Kind       string            `json:"kind"`
	Failure    ProviderErrorKind `json:"failure,omitempty"`
	RetryAfter *Duration         `json:"retry_after,omitempty"`
	Detail     string            `json:"detail,omitempty"`
}

// The kinds of ResetReason.
const (
	ResetMalformed        = "malformed"
	ResetRetryableFailure = "retryable_failure"
)

// ProviderStreamReset tells renderers to discard every delta of the attempt
// since the last step boundary: a new attempt follows.
type ProviderStreamReset struct {
	Step    int         `json:"step"`
	Attempt int         `json:"attempt"`
	Reason  ResetReason `json:"reason"`
}

// ProviderRequestRetry reports a retryable failure of one physical request
// and the wait before the next.
type ProviderRequestRetry struct {
	Step       int               `json:"step"`
	Attempt    int               `json:"attempt"`
	Kind       ProviderErrorKind `json:"kind"`
	Status     int               `json:"status,omitempty"`
	RetryAfter *Duration         `json:"retry_after,omitempty"`
	Delay      Duration          `json:"delay"`
	Message    string            `json:"message"`
}

// HostedToolActivity is one use of a tool that the model's backend ran
// itself (a hosted tool enabled on the model: web search, code execution,
// file search), reported after the turn that used it and before its tool
// calls. Detail is the backend's short account of it, sanitized; a web
// search carries its Query and the URLs of its results.
type HostedToolActivity struct {
	Step    int      `json:"step"`
	Attempt int      `json:"attempt"`
	Name    string   `json:"name"`
	ID      string   `json:"id,omitempty"`
	Detail  string   `json:"detail,omitempty"`
	Query   string   `json:"query,omitempty"`
	URLs    []string `json:"urls,omitempty"`
}

// TextDelta is a piece of streamed assistant text (ephemeral). Chunk
// boundaries are not stable; use RunCompleted for the final text.
type TextDelta struct {
	Step    int    `json:"step"`
	Attempt int    `json:"attempt"`
	Text    string `json:"text"`
}

// ReasoningDelta is a piece of streamed reasoning (ephemeral).
type ReasoningDelta struct {
	Step    int    `json:"step"`
	Attempt int    `json:"attempt"`
	Text    string `json:"text"`
}

// ToolCallDelta is a piece of a tool call being assembled (ephemeral).
type ToolCallDelta struct {
	Step      int    `json:"step"`
	Attempt   int    `json:"attempt"`
	Index     int    `json:"index"`
	ID        string `json:"id,omitempty"`
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
}

func (UsageUpdated) EventType() string         { return TypeUsageUpdated }
func (HostedToolActivity) EventType() string   { return TypeHostedToolActivity }
func (ModelCallCompleted) EventType() string   { return TypeModelCallCompleted }
func (ProviderStreamReset) EventType() string  { return TypeProviderStreamReset }
func (ProviderRequestRetry) EventType() string { return TypeProviderRetry }
func (TextDelta) EventType() string            { return TypeTextDelta }
func (ReasoningDelta) EventType() string       { return TypeReasoningDelta }
func (ToolCallDelta) EventType() string        { return TypeToolCallDelta }

// Tool calls: proposed, started, finished or detached, with ephemeral
// progress notes while they run.

// ToolProposed is a complete tool call from the model, before it runs.
type ToolProposed struct {
	ToolCallID string          `json:"tool_call_id"`
	Name       string          `json:"name"`
	Arguments  json.RawMessage `json:"arguments"`
	Step       int             `json:"step"`
}

// ToolStarted says a tool call began executing.
type ToolStarted struct {
	ToolCallID string `json:"tool_call_id"`
	Name       string `json:"name"`
}

// ToolFinished ends a tool call. Output is the result the model sees.
type ToolFinished struct {
	ToolCallID string     `json:"tool_call_id"`
	Name       string     `json:"name"`
	Status     ToolStatus `json:"status"`
	Output     string     `json:"output"`
	Duration   Duration   `json:"duration,omitempty"`
}

// ToolDetached says an async tool call keeps running while the loop goes on.
type ToolDetached struct {
	ToolCallID string `json:"tool_call_id"`
	Name       string `json:"name"`
}

// ToolProgress is an ephemeral progress note from a running tool.
type ToolProgress struct {
	ToolCallID string `json:"tool_call_id"`
	Message    string `json:"message"`
}

func (ToolProposed) EventType() string { return TypeToolProposed }
func (ToolStarted) EventType() string  { return TypeToolStarted }
func (ToolFinished) EventType() string { return TypeToolFinished }
func (ToolDetached) EventType() string { return TypeToolDetached }
func (ToolProgress) EventType() string { return TypeToolProgress }

// Steering: accepted by the run, then applied at a step boundary or
// retracted before it.

// SteeringAccepted says the run took a steering input; it enters history at
// the next model-step boundary.
type SteeringAccepted struct {
	SteeringID string `json:"steering_id"`
	Text       string `json:"text"`
}

// SteeringApplied says staged steering entered the conversation history.
type SteeringApplied struct {
	SteeringID string `json:"steering_id"`
}

// SteeringRetracted says staged steering was withdrawn before it applied.
type SteeringRetracted struct {
	SteeringID string `json:"steering_id"`
}

func (SteeringAccepted) EventType() string  { return TypeSteeringAccepted }
func (SteeringApplied) EventType() string   { return TypeSteeringApplied }
func (SteeringRetracted) EventType() string { return TypeSteeringRetracted }

// Host input: a tool's question to the host and its resolution.

// HostInputRequested is a question from a tool to the host. The session is
// WaitingForHostInput while any request is open.
type HostInputRequested struct {
	RequestID  string          `json:"request_id"`
	ToolCallID string          `json:"tool_call_id"`
	Prompt     string          `json:"prompt"`
	Schema     json.RawMessage `json:"schema,omitempty"`
}

// HostInputResolved says a host-input request got its answer (or was closed
// by cancellation, with Interrupted set).
type HostInputResolved struct {
	RequestID   string `json:"request_id"`
	ToolCallID  string `json:"tool_call_id"`
	Interrupted bool   `json:"interrupted,omitempty"`
}

func (HostInputRequested) EventType() string { return TypeHostInputRequested }
func (HostInputResolved) EventType() string  { return TypeHostInputResolved }

// Compaction: the history replaced by a summary.

// CompactionStarted comes before the compactor is called.
type CompactionStarted struct {
	EstimatedContextTokens int `json:"estimated_context_tokens"`
}

// CompactionCompleted comes after replacement history was committed.
type CompactionCompleted struct {
	MessagesBefore int `json:"messages_before"`
	MessagesAfter  int `json:"messages_after"`
}

func (CompactionStarted) EventType() string   { return TypeCompactionStarted }
func (CompactionCompleted) EventType() string { return TypeCompactionCompleted }
