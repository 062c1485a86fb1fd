package activities

import (
	"encoding/json"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/carry"
	"github.com/keelrun/keel/internal/delegation"
	"github.com/keelrun/keel/server/provider"
	"github.com/keelrun/keel/server/tool"
)

// Activity names, as registered on the worker.
const (
	ModelTurnName = "ModelTurn"
	ToolName      = "Tool"
)

// QueryTranscript is the session's query for its active run's transcript
// (api).
const QueryTranscript = carry.QueryTranscript

// TranscriptRef names a prefix of a run's transcript: the first Len
// messages of the session's execution (WorkflowID, RunID). Model turns carry a
// reference plus the messages added since the previous turn, so history
// grows with the conversation instead of with its square.
type TranscriptRef struct {
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id"`
	Len        int    `json:"len"`
	// Generation counts the compactions of the run so far: a compaction
	// replaces the transcript, so cached prefixes of an older generation
	// no longer apply.
	Generation int `json:"generation,omitempty"`
}

// ModelTurnInput is one attempt at one model turn.
type ModelTurnInput struct {
	SessionID string `json:"session_id"`
	RunID     string `json:"run_id"`
	Step      int    `json:"step"`
	Attempt   int    `json:"attempt"`
	// Model is a model spec such as "openai:gpt-4o" or "scripted:demo".
	Model     string   `json:"model"`
	System    string   `json:"system,omitempty"`
	MaxTokens int      `json:"max_tokens,omitempty"`
	Tools     []string `json:"tools,omitempty"`
	// Transcript is the conversation so far; Tail holds its last messages
	// (those the worker may not have seen yet).
	Transcript TranscriptRef  `json:"transcript"`
	Tail       []keel.Message `json:"tail,omitempty"`
	// AfterSeq is the last durable sequence before this turn; deltas carry
	// it so readers can order them among durable events.
	AfterSeq int64 `json:"after_seq"`
	// Budget is what the request must fit in (docs/contract.md §20).
	// Nil: only the worker's ceilings apply.
	Budget *BudgetCheck `json:"budget,omitempty"`
	// OutputSchema is the JSON Schema the run's final answer must match,
	// which the provider is asked to follow where it can
	// (docs/contract.md §21.1); the run checks the answer itself.
	// Optional.
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	// Reasoning is the run's reasoning setting; nil takes the model's
	// own (keel.yaml).
	Reasoning *keel.Reasoning `json:"reasoning,omitempty"`
	// Relay is where the turn's deltas are copied besides the run's own
	// stream, for a child session: its ancestors' streams, each with the
	// child's path there (docs/contract.md §21.4). Optional.
	Relay []api.RelayTarget `json:"relay,omitempty"`
	// Rate is the request's place under its rate limit, when the run
	// waited for it with a timer (ModelTurnResult.RateWait): the turn sends
	// at once, without asking the limit again (docs/contract.md §20.5).
	Rate *RateHold `json:"rate,omitempty"`
	// CheckRuntime asks the turn, before anything else, whether keel is
	// shut down: the first turn of a new session of api.ShapeLean, which
	// learns it here rather than with a local activity of its own
	// (docs/contract.md §13). Shut down, the turn sends nothing and fails
	// with TurnFailure.Shutdown.
	CheckRuntime bool `json:"check_runtime,omitempty"`
}

// RateHold is a model request's place under a rate limit that its run
// waits for with a durable timer (docs/contract.md §20.5): a turn told to
// wait longer than LocalRateWait hands it to the run, which sleeps for
// Wait and runs the turn again with it. Tokens is what it reserved.
type RateHold struct {
	Key    string        `json:"key"`
	ID     string        `json:"id"`
	Tokens int64         `json:"tokens,omitempty"`
	Wait   keel.Duration `json:"wait"`
}

// RateGiveBackName is the local activity a run cancelled while its timer
// waits for a RateHold runs to give the place back.
const RateGiveBackName = "RateGiveBack"

// ModelTurnResult is a successful model turn.
type ModelTurnResult struct {
	// RateWait, when set, says the request was not sent: its rate limit
	// gave it a place later than LocalRateWait, which the run waits for
	// with a timer before it runs the same attempt again with Rate set
	// (docs/contract.md §20.5). Nothing else is set.
	RateWait *RateHold `json:"rate_wait,omitempty"`

	Response provider.Response     `json:"response"`
	Metrics  keel.ModelCallMetrics `json:"metrics"`
	// Calls holds, for each tool call of the response in order, whether this
	// worker can run it and how.
	Calls []CallPlan `json:"calls,omitempty"`
	// ToolTokens estimates the tokens the tool schemas take in a request.
	ToolTokens int `json:"tool_tokens,omitempty"`
	// MaxSteps is the worker's cap on the run's model turns
	// (Policy.MaxSteps); 0: none. The run applies the smaller of it and its
	// own. Recorded with the result, so replay sees the cap the run saw.
	MaxSteps int `json:"max_steps,omitempty"`
	// Limits are the budget limits the request was held to, for the run's
	// warnings; recorded with the result like MaxSteps.
	Limits []BudgetLimit `json:"limits,omitempty"`
	// Sinks are the names of the worker's event sinks, sorted; recorded
	// with the result, so that an execution of api.ShapeLean delivers to
	// the sinks its first turn named, on replay too (docs/contract.md
	// §23.6).
	Sinks []string `json:"sinks,omitempty"`
	// Answer is the run's structured answer, which the run derives from
	// the response once it matched the output schema; never recorded.
	Answer json.RawMessage `json:"-"`
}

// CallPlan says how a tool call will run.
type CallPlan struct {
	Available bool        `json:"available"`
	Traits    tool.Traits `json:"traits"`
	// Approval is the worker's policy for the tool (Policy.Approvals);
	// empty: none. The run applies the stricter of it and its own.
	Approval api.Approval `json:"approval,omitempty"`
	// Agent is set for a delegation tool (agent__NAME): the agent the
	// call runs as a child session and the worker's limits of
	// delegation, recorded so that a replay delegates as the run did
	// (docs/contract.md §21.3).
	Agent *AgentPlan `json:"agent,omitempty"`
}

// AgentPlan is how a delegation call runs its agent.
type AgentPlan struct {
	Spec   delegation.AgentSpec        `json:"spec"`
	Limits delegation.DelegationLimits `json:"limits"`
}

// TurnFailure is the detail of a failed or cancelled model turn attempt.
type TurnFailure struct {
	// Provider is set for provider failures, Malformed for unusable
	// responses.
	Provider  *keel.ProviderError `json:"provider,omitempty"`
	Malformed string              `json:"malformed,omitempty"`
	// Usage is what the abandoned attempt reported; it is billed all the same.
	Usage keel.Usage `json:"usage"`
	// Partial is the text streamed before the attempt ended.
	Partial string `json:"partial,omitempty"`
	// Budget is set when a budget refused the request before it was
	// sent: nothing was spent.
	Budget *BudgetRefusal `json:"budget,omitempty"`
	// Unsent says the attempt was cancelled before its request was sent,
	// while it waited for its rate limit or a concurrency slot: no
	// request to count (docs/contract.md §20.5).
	Unsent bool `json:"unsent,omitempty"`
	// Shutdown says keel was shut down before the session's first
	// request (ModelTurnInput.CheckRuntime): nothing was sent.
	Shutdown bool `json:"shutdown,omitempty"`
}

// ToolInput is one tool call.
type ToolInput struct {
	SessionID string        `json:"session_id"`
	RunID     string        `json:"run_id"`
	Call      keel.ToolCall `json:"call"`
	// Step is the model step whose response made the call (0 from a run
	// started before the field existed); it only labels log records.
	Step int `json:"step,omitempty"`
	// Answers are the host's answers to the call's questions so far.
	Answers  map[string]json.RawMessage `json:"answers,omitempty"`
	AfterSeq int64                      `json:"after_seq"`
	// Model is the run's model spec, which the call may ask (tool.Sample:
	// an MCP server's sampling request). Empty: sampling is refused.
	Model string `json:"model,omitempty"`
}

// ToolOutput is how a tool call ended, or the question it needs answered.
type ToolOutput struct {
	Status    keel.ToolStatus `json:"status"`
	Output    string          `json:"output"`
	NeedInput *tool.Question  `json:"need_input,omitempty"`
	// Attachments are the references of the files the result showed
	// (tool.Result.Files), stored.
	Attachments []keel.Attachment `json:"attachments,omitempty"`
	Duration    keel.Duration     `json:"duration"`
	// Sampling is the usage of each request the call made to the run's
	// model, in order; the run counts it.
	Sampling []keel.Usage `json:"sampling,omitempty"`
}

// MaxToolOutput caps the output a tool call returns to the model (and to
// workflow history).
const MaxToolOutput = 64 << 10

// ShutdownName is the activity that cancels every active run.
const ShutdownName = "Shutdown"

// RuntimeStateName is the local activity a new session uses to learn
// whether keel is shut down.
const RuntimeStateName = "RuntimeState"

// ShutdownResult says how many active runs a shutdown cancelled.
type ShutdownResult struct {
	Cancelled int `json:"cancelled"`
}

// CompactName is the activity that summarizes a conversation.
const CompactName = "Compact"

// CompactInput asks for a summary of the first Cut messages of a
// transcript.
type CompactInput struct {
	SessionID  string         `json:"session_id"`
	RunID      string         `json:"run_id"`
	Model      string         `json:"model"`
	Transcript TranscriptRef  `json:"transcript"`
	Tail       []keel.Message `json:"tail,omitempty"`
	Cut        int            `json:"cut"`
	// Step is the step the compaction comes before (0 from a run started
	// before the field existed); it only labels log records.
	Step int `json:"step,omitempty"`
}

// CompactResult is the summary that replaces the compacted messages.
type CompactResult struct {
	Summary string     `json:"summary"`
	Usage   keel.Usage `json:"usage"`
}
