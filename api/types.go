package api

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/keelrun/keel"
)

// RunConfig says which model and tools a run uses. It travels in workflow
// input and history, so it never holds secrets.
type RunConfig struct {
	// Model is a model spec the worker offers: "scripted:demo",
	// "scripted:NAME", "openai:MODEL", "anthropic:MODEL", or the NAME of a
	// model of its keel.yaml. Default DefaultModel.
	Model string `json:"model,omitempty"`
	// System is the system prompt. Optional.
	System string `json:"system,omitempty"`
	// Tools names the tools the model may call. Optional: nil takes the
	// session's; an empty list means none (so no omitempty).
	Tools []string `json:"tools"`
	// MaxSteps bounds the model turns of one run. Default DefaultMaxSteps.
	MaxSteps int `json:"max_steps,omitempty"`
	// MaxTokens caps each response. Optional; the provider's default.
	MaxTokens int `json:"max_tokens,omitempty"`
	// Reasoning asks the model to reason before it answers, by effort or
	// by a budget of tokens; a send whose model cannot take it is
	// refused. Optional; the model's own setting (keel.yaml), else none.
	Reasoning *keel.Reasoning `json:"reasoning,omitempty"`
	// Timeouts of the activities. Optional; defaults below.
	ModelTimeout   keel.Duration `json:"model_timeout,omitempty"`
	HeartbeatAfter keel.Duration `json:"heartbeat_timeout,omitempty"`
	// CompactAt is the context estimate (tokens) above which the run
	// compacts its history before a model step: the older messages are
	// replaced by a summary the model writes. Default DefaultCompactAt;
	// negative disables compaction.
	CompactAt int `json:"compact_at,omitempty"`
	// Approvals sets a policy per tool name: "allow" (run it), "ask" (ask
	// the host first, through host input) or "deny" (refuse it). The key "*"
	// sets the default. Optional; default "allow".
	Approvals map[string]Approval `json:"approvals,omitempty"`
	// Budget bounds what this run may spend; SessionBudget what the
	// session's runs may spend together, counted from the session's
	// start (a fork counts from its own). The worker's ceilings apply on
	// top, and a budget above one is refused (docs/contract.md §20).
	// Optional.
	Budget        *Budget `json:"budget,omitempty"`
	SessionBudget *Budget `json:"session_budget,omitempty"`
	// OutputSchema is a JSON Schema the run's final answer must match: the
	// model is asked for it natively where its provider can be, keel
	// validates the answer, and one that does not match counts as a
	// malformed response of the turn (docs/contract.md §21.1). The
	// outcome then carries the parsed answer (keel.Outcome.Answer). At
	// most MaxOutputSchemaBytes, nested at most MaxOutputSchemaDepth, and
	// self-contained: references to other documents are refused, never
	// fetched. Optional.
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	// Agent names an agent the worker defines (keel.yaml agents,
	// docs/contract.md §21.2): the run takes the agent's model,
	// instructions, tools, limits and output schema, which a send that
	// names an agent may not set itself. Optional.
	Agent string `json:"agent,omitempty"`
	// Hooks names hooks the worker offers (keel.yaml hooks, Go
	// worker.Options.Hooks) that run at this run's execution boundaries
	// (docs/contract.md §23): a send naming another is refused. At most
	// MaxRunHooks names, each a valid agent name. Optional: none takes the
	// session's, and an agent's hooks come before the send's.
	Hooks []string `json:"hooks,omitempty"`
}

// MaxRunHooks bounds RunConfig.Hooks.
const MaxRunHooks = 8

// Approval is a tool's approval policy.
type Approval string

// The approval policies.
const (
	ApprovalAllow Approval = "allow"
	ApprovalAsk   Approval = "ask"
	ApprovalDeny  Approval = "deny"
)

// ApprovalFor returns the policy for a tool.
func (c RunConfig) ApprovalFor(name string) Approval {
	if a, ok := c.Approvals[name]; ok {
		return a
	}
	if a, ok := c.Approvals["*"]; ok {
		return a
	}
	return ApprovalAllow
}

// Defaults of RunConfig.
const (
	DefaultModel          = "scripted:demo"
	DefaultMaxSteps       = 32
	DefaultModelTimeout   = keel.Duration(10 * time.Minute)
	DefaultHeartbeatAfter = keel.Duration(15 * time.Second)
	DefaultCompactAt      = 100_000
)

// WithDefaults returns c with its unset fields set to the defaults.
func (c RunConfig) WithDefaults() RunConfig {
	if c.Model == "" {
		c.Model = DefaultModel
	}
	if c.MaxSteps <= 0 {
		c.MaxSteps = DefaultMaxSteps
	}
	if c.ModelTimeout <= 0 {
		c.ModelTimeout = DefaultModelTimeout
	}
	if c.HeartbeatAfter <= 0 {
		c.HeartbeatAfter = DefaultHeartbeatAfter
	}
	if c.CompactAt == 0 {
		c.CompactAt = DefaultCompactAt
	}
	return c
}

// Merge returns c with the fields set in o replacing its own.
func (c RunConfig) Merge(o *RunConfig) RunConfig {
	if o == nil {
		return c
	}
	if o.Model != "" {
		c.Model = o.Model
	}
	if o.System != "" {
		c.System = o.System
	}
	if o.Tools != nil {
		c.Tools = o.Tools
	}
	if o.MaxSteps > 0 {
		c.MaxSteps = o.MaxSteps
	}
	if o.MaxTokens > 0 {
		c.MaxTokens = o.MaxTokens
	}
	if o.Reasoning != nil {
		c.Reasoning = o.Reasoning
	}
	if o.ModelTimeout > 0 {
		c.ModelTimeout = o.ModelTimeout
	}
	if o.HeartbeatAfter > 0 {
		c.HeartbeatAfter = o.HeartbeatAfter
	}
	if o.Approvals != nil {
		c.Approvals = o.Approvals
	}
	if o.CompactAt != 0 {
		c.CompactAt = o.CompactAt
	}
	if o.Budget != nil {
		c.Budget = o.Budget
	}
	if o.SessionBudget != nil {
		c.SessionBudget = o.SessionBudget
	}
	if len(o.OutputSchema) > 0 {
		c.OutputSchema = o.OutputSchema
	}
	if o.Agent != "" {
		c.Agent = o.Agent
	}
	if o.Hooks != nil {
		c.Hooks = o.Hooks
	}
	return c
}

// Validate checks what WithDefaults cannot fix.
func (c RunConfig) Validate() error {
	for name, a := range c.Approvals {
		switch a {
		case ApprovalAllow, ApprovalAsk, ApprovalDeny:
		default:
			return keel.Errorf(keel.CodeInvalidInput, "approval %q for tool %q: use allow, ask or deny", a, name)
		}
	}
	if c.MaxSteps < 0 {
		return keel.Errorf(keel.CodeInvalidInput, "max_steps cannot be negative")
	}
	if err := c.Budget.Validate("budget"); err != nil {
		return err
	}
	if err := c.SessionBudget.Validate("session_budget"); err != nil {
		return err
	}
	if c.Reasoning != nil {
		if err := c.Reasoning.Validate(); err != nil {
			return err
		}
	}
	if c.Agent != "" && !ValidAgentName(c.Agent) {
		return keel.Errorf(keel.CodeInvalidInput, "agent: want 1 to %d letters, digits, '-' or '_', starting with a letter", MaxAgentNameBytes)
	}
	if len(c.Hooks) > MaxRunHooks {
		return keel.Errorf(keel.CodeInvalidInput, "hooks: at most %d, not %d", MaxRunHooks, len(c.Hooks))
	}
	for i, h := range c.Hooks {
		if !ValidAgentName(h) {
			return keel.Errorf(keel.CodeInvalidInput, "hooks[%d]: want 1 to %d letters, digits, '-' or '_', starting with a letter", i, MaxAgentNameBytes)
		}
		if slices.Contains(c.Hooks[:i], h) {
			return keel.Errorf(keel.CodeInvalidInput, "hooks[%d]: %s is named twice", i, h)
		}
	}
	return CheckOutputSchema(c.OutputSchema)
}

// SessionInput starts a Session workflow: what a client sends with the
// update-with-start of a session's first send, or with a fork. keel's own
// workflows start later executions and child sessions with more fields,
// which no client sets.
type SessionInput struct {
	SessionID string `json:"session_id"`
	// Config holds the session's defaults for its runs: what a send's own
	// Config leaves unset. The client that creates the session sets it;
	// afterwards only a send with SetDefault changes it, and each
	// execution hands the current defaults to the next.
	Config RunConfig `json:"config"`
	// HandOver bounds each execution of the session before it continues
	// as new. Optional; zero fields take the defaults of HandOverLimits.
	HandOver HandOverLimits `json:"hand_over,omitempty"`
	// Fork starts the session as a fork of another (docs/contract.md
	// §19); nil for a new session. Later executions of the session take
	// what they need from what the previous one handed over.
	Fork *ForkInput `json:"fork,omitempty"`
	// Conversation starts a new session with these messages as its
	// transcript before its first run: an eval case's conversation
	// (EvalCase.Conversation, docs/contract.md §24.1), which must pass
	// CheckConversation. Nil for every other session; never with Fork.
	Conversation []keel.Message `json:"conversation,omitempty"`
	// Shape is the shape of workflow code the session runs, kept by its
	// later executions and its children. Set it to ShapeLean, as keel's
	// clients do; 0, which starters from before it send, runs the session
	// as keel v0.1.0 did, whose clients read its commit markers
	// (docs/contract.md §14.2).
	Shape int `json:"shape,omitempty"`
}

// ShapeLean is the Session workflow shape since v0.1.0: no commit markers
// and no search-attribute upserts, so that a run costs no billable action
// beyond its start, its send, its activities, its heartbeats and its
// continue-as-new. A reader checks commits by the workflow task a query
// answer reports (EventsPage.Task). Shape 0 is v0.1.0's, kept for the
// sessions v0.1.0's clients start.
const ShapeLean = 1

// IfActive says what Send does while a run is active.
type IfActive string

// The choices of IfActive.
const (
	IfActiveReject IfActive = "reject" // fail with keel.ErrRunActive (default)
	IfActiveQueue  IfActive = "queue"  // start it as the next run
)

// SendRequest is the argument of the "send" update.
type SendRequest struct {
	Prompt string `json:"prompt"`
	// Attachments are images and documents the prompt carries, stored
	// first (client.Attach): at most keel.MaxAttachments. Optional.
	Attachments []keel.Attachment `json:"attachments,omitempty"`
	// Config is this run's configuration: its set fields replace the
	// session's defaults for this run only. Optional.
	Config *RunConfig `json:"config,omitempty"`
	// IfActive says what to do while a run is active. Default
	// IfActiveReject.
	IfActive IfActive `json:"if_active,omitempty"`
	// SetDefault makes Config the session's default as well: when this
	// run starts, Config's set fields replace the defaults', for this run
	// and every later one that does not set them itself. It needs a
	// Config. Optional; default false, under which the session's
	// defaults stay as they were (docs/contract.md §11.6).
	SetDefault bool `json:"set_default,omitempty"`
	// Once is the caller's key for this prompt (client.Session.SendOnce,
	// a schedule's firing): a send under a key the session took before
	// starts nothing and answers that send's result, with Repeated set,
	// across continue-as-new too; the session remembers its last
	// OnceRemembered keys (docs/contract.md §11.7). 1 to MaxOnceBytes
	// bytes; optional.
	Once string `json:"once,omitempty"`
}

// MaxOnceBytes bounds SendRequest.Once.
const MaxOnceBytes = 256

// OnceRemembered is how many keys of SendRequest.Once a session
// remembers, newest last, carried across continue-as-new.
const OnceRemembered = 64

// MaxPromptBytes bounds a prompt or steering text: the default of
// Limits.PromptBytes and Limits.SteeringBytes.
const MaxPromptBytes = 256 << 10

// Limits bound what callers send a session, so that no caller can push its
// histories towards Temporal's limits (50 MB or 51,200 events an
// execution) or its payload limit (2 MB). A worker applies them in the
// update validators of its workflows (worker.Options.Limits, keel.yaml's
// limits), which Temporal runs when an update arrives and never on replay,
// so a worker whose limits changed still replays every history. Signals
// (steer and respond also arrive as signals) are re-run on replay and
// always apply the defaults, never a worker's own values. Zero fields take
// the defaults; docs/contract.md §18.
type Limits struct {
	// PromptBytes bounds a prompt. Default MaxPromptBytes (256 KiB).
	PromptBytes int
	// SteeringBytes bounds a steering text. Default MaxPromptBytes.
	SteeringBytes int
	// AnswerBytes bounds an answer to a host-input request (its JSON).
	// Default MaxAnswerBytes.
	AnswerBytes int
	// ConfigBytes bounds a run's configuration as JSON (system prompt,
	// tools, approvals...): the session's defaults merged with the
	// send's own. Default MaxConfigBytes.
	ConfigBytes int
	// QueuedPrompts bounds the prompts waiting in a session behind its
	// active run (if_active "queue"). Default MaxQueuedPrompts.
	QueuedPrompts int
	// StagedSteers bounds the steering a run accepted and has not applied
	// yet. Default MaxStagedSteers.
	StagedSteers int
}

// Defaults of Limits, which signals always apply.
const (
	MaxAnswerBytes   = 256 << 10
	MaxConfigBytes   = 256 << 10
	MaxQueuedPrompts = 32
	MaxStagedSteers  = 32
	// MaxSteeringIDBytes bounds the steering ID of a retraction (IDs are
	// "steer-N"); it is not configurable.
	MaxSteeringIDBytes = 64
)

// WithDefaults returns l with its unset (zero or negative) fields set to
// the defaults.
func (l Limits) WithDefaults() Limits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.PromptBytes, MaxPromptBytes)
	def(&l.SteeringBytes, MaxPromptBytes)
	def(&l.AnswerBytes, MaxAnswerBytes)
	def(&l.ConfigBytes, MaxConfigBytes)
	def(&l.QueuedPrompts, MaxQueuedPrompts)
	def(&l.StagedSteers, MaxStagedSteers)
	return l
}

// SendResult is the answer of the "send" update.
type SendResult struct {
	RunID    string `json:"run_id"`
	Number   int    `json:"number"`
	Revision int64  `json:"revision"`
	// BaseSeq is the last durable sequence before the run's first event.
	BaseSeq int64 `json:"base_seq"`
	Queued  bool  `json:"queued,omitempty"`
	// Execution is the Temporal run ID of the session's execution that
	// runs it (started runs only): its page in the Web UI.
	Execution string `json:"execution,omitempty"`
	// Repeated says the send's key (SendRequest.Once) was taken before:
	// this is that send's result, and nothing was started now.
	Repeated bool `json:"repeated,omitempty"`
}

// EventsQuery is the argument of the "events" query: the events after
// After, at most Limit of them (default and cap DefaultEventsLimit). With
// Snapshot set, the page is pinned to that high-watermark (a continuation
// of an earlier page); without it, the query captures the current one.
type EventsQuery struct {
	After    int64 `json:"after"`
	Limit    int   `json:"limit,omitempty"`
	Snapshot int64 `json:"snapshot,omitempty"`
}

// DefaultEventsLimit is the default and largest page of the events query.
const DefaultEventsLimit = 500

// EventsPage is the answer of the "events" query.
type EventsPage struct {
	Events []keel.Envelope `json:"events"`
	// Snapshot is the high-watermark the page was read at.
	Snapshot int64 `json:"snapshot"`
	// More says events up to Snapshot remain after this page.
	More bool `json:"more"`
	// Segment, when set, holds the events after the cursor instead of
	// Events: they are in the content store (EventSegment.Key), read with
	// the client's data converter. The next page continues after its Last.
	Segment *EventSegment `json:"segment,omitempty"`
	// ActiveRun is the run in progress, whose events the log holds as
	// they happen.
	ActiveRun *RunRef `json:"active_run,omitempty"`
	// Execution and Task say what the answer was computed from: the
	// session's execution (its Temporal run ID) and the WorkflowTaskStarted
	// event of the last workflow task its state reflects. The page holds
	// only committed events if that task completed (its
	// WorkflowTaskCompleted names it as StartedEventId); a task that
	// failed or timed out is retried at a new event, so an answer from
	// its state never matches a completed one (docs/contract.md §14.2).
	// Task is 0 when the worker's state is ahead of its last task (it
	// replayed events no task has processed yet): ask again after the
	// next task.
	Execution string `json:"execution,omitempty"`
	Task      int64  `json:"task,omitempty"`
}

// OutcomeRequest is the argument of the session's "outcome" update: the
// number of the run whose outcome is wanted, and whether to wait for it to
// end. Without waiting, a run that has not ended is keel.RunActive.
//
// Temporal holds at most a few updates in flight per execution (10 by
// default), and a waiting outcome update is one of them. The session lets
// at most MaxOutcomeWaiters wait at once, so that sends, steering and
// answers always find room; a waiter beyond that is refused with
// keel.TooMany (ask with NoWait, or follow the log). keel's own client and
// gateway never wait here: they follow the log (docs/foreign-clients.md).
//
// The answer is a keel.Outcome whose final text is cut to MaxOutcomeText
// bytes, with TextCut set, when it is longer: a payload that large would
// be moved to keel's content store, which only keel's codec reads. The
// whole text is in the run's terminal event (keel.Outcome.Seq).
type OutcomeRequest struct {
	Run    int  `json:"run"`
	NoWait bool `json:"no_wait,omitempty"`
}

const (
	// OutcomesRemembered is how many of its latest runs' outcomes a
	// session answers with the outcome update; an older run's outcome is
	// its terminal event in the log.
	OutcomesRemembered = 64
	// MaxOutcomeWaiters is how many outcome updates may wait in one
	// session execution at once (OutcomeRequest).
	MaxOutcomeWaiters = 5
	// MaxOutcomeText is the longest final text the outcome update
	// answers whole (OutcomeRequest): with the outcome's other fields it
	// stays under keel's claim-check threshold of 4 KiB.
	MaxOutcomeText = 2 << 10
)

// RunRef names a run.
type RunRef struct {
	RunID   string `json:"run_id"`
	Number  int    `json:"number"`
	BaseSeq int64  `json:"base_seq"`
}

// SessionStatus is the answer of the Session's "state" query.
type SessionStatus struct {
	SessionID string            `json:"session_id"`
	State     keel.SessionState `json:"state"`
	Revision  int64             `json:"revision"`
	// LastSeq is the last committed sequence of the session's log. The
	// active run's events follow it, numbered from ActiveRun.BaseSeq+1, up
	// to Run.LastSeq.
	LastSeq   int64         `json:"last_seq"`
	Runs      int           `json:"runs"`
	ActiveRun *RunRef       `json:"active_run,omitempty"`
	Queued    int           `json:"queued,omitempty"`
	Usage     keel.Usage    `json:"usage"`
	Last      *keel.Outcome `json:"last_outcome,omitempty"`
	Shutdown  bool          `json:"shutdown,omitempty"`
	// HandOvers counts the times the session continued as new.
	HandOvers int `json:"hand_overs,omitempty"`
	// Run is the state of the active run; nil while the session is idle.
	Run *RunStatus `json:"run,omitempty"`
	// Closed is set when the Session workflow is no longer running
	// (terminated by an operator or by a Temporal limit, or failed): State
	// is then StateTerminated or StateFailed. Only clients fill it in.
	Closed *ClosedSession `json:"closed,omitempty"`
	// Parent is where the session was forked from; nil for a session
	// that is no fork.
	Parent *ForkOrigin `json:"parent,omitempty"`
	// Delegated is set for a child session: who delegated to it
	// (docs/contract.md §21.3).
	Delegated *Delegation `json:"delegated,omitempty"`
}

// ClosedSession says why a Session workflow stopped running.
type ClosedSession struct {
	// Status is Temporal's execution status, such as "Terminated".
	Status string `json:"status"`
	// Reason is the operator's or Temporal's reason, when one was given.
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
}

// RunStatus is the state of a session's active run (SessionStatus.Run).
type RunStatus struct {
	RunID string            `json:"run_id"`
	State keel.SessionState `json:"state"`
	// Requests are the open host-input requests, oldest first.
	Requests []HostRequest `json:"requests,omitempty"`
	// Staged are the IDs of accepted steering not yet applied.
	Staged []string `json:"staged,omitempty"`
	// Jobs are the tool call IDs of detached calls still running.
	Jobs []string `json:"jobs,omitempty"`
	// Children are the child sessions the run is waiting for
	// (docs/contract.md §21.3).
	Children []ChildRef    `json:"children,omitempty"`
	Step     int           `json:"step"`
	LastSeq  int64         `json:"last_seq"`
	Outcome  *keel.Outcome `json:"outcome,omitempty"`
	Usage    keel.Usage    `json:"usage"`
	Revision int64         `json:"revision"`
}

// HistoryQuery is the argument of the "history" query: a page of the
// transcript starting at Offset (default 0), at most Limit messages
// (default DefaultHistoryLimit).
type HistoryQuery struct {
	Offset int `json:"offset,omitempty"`
	Limit  int `json:"limit,omitempty"`
}

// DefaultHistoryLimit is the default page of the history query.
const DefaultHistoryLimit = 200

// HistoryPage is the answer of the "history" query.
type HistoryPage struct {
	Messages []keel.Message `json:"messages"`
	Offset   int            `json:"offset"`
	Total    int            `json:"total"`
	Revision int64          `json:"revision"`
}

// SteerRequest is the argument of the "steer" update (and signal).
type SteerRequest struct {
	Text string `json:"text"`
	// Attachments are images and documents the steering carries, as a
	// send's. Optional.
	Attachments []keel.Attachment `json:"attachments,omitempty"`
	// RunID, when set, names the run the steering is for: the session
	// refuses it (keel.NotAccepting) once another run is active.
	RunID string `json:"run_id,omitempty"`
}

// SteerResult is the answer of the "steer" update: the staged input's ID.
type SteerResult struct {
	SteeringID string `json:"steering_id"`
}

// RetractRequest is the argument of the "retract_steering" update.
type RetractRequest struct {
	SteeringID string `json:"steering_id"`
	// RunID: as SteerRequest.RunID; another run's retraction is NotFound.
	RunID string `json:"run_id,omitempty"`
}

// Retraction is how a retraction ended, decided atomically in the run.
type Retraction string

// The answers of retract_steering.
const (
	Retracted      Retraction = "retracted"
	AlreadyApplied Retraction = "already_applied"
	NotFound       Retraction = "not_found"
)

// RetractResult is the answer of the "retract_steering" update.
type RetractResult struct {
	Result Retraction `json:"result"`
}

// RespondRequest is the argument of the "respond" update (and signal): the
// answer to an open host-input request, which must match its schema.
type RespondRequest struct {
	RequestID string          `json:"request_id"`
	Answer    json.RawMessage `json:"answer"`
	// RunID: as SteerRequest.RunID.
	RunID string `json:"run_id,omitempty"`
}

// CancelRequest is the optional payload of the "cancel" signal. With RunID
// set, the session cancels its active run only if it is that run, so
// a late cancel of a run that ended never reaches the next one. Without a
// payload the active run is cancelled, whichever it is.
type CancelRequest struct {
	RunID string `json:"run_id,omitempty"`
}

// HostRequest is an open host-input request.
type HostRequest struct {
	RequestID  string          `json:"request_id"`
	ToolCallID string          `json:"tool_call_id"`
	Prompt     string          `json:"prompt"`
	Schema     json.RawMessage `json:"schema,omitempty"`
	// Path and SessionID are set on a request of a child session, listed
	// by its ancestors (docs/contract.md §21.4): the child's path from
	// the session that lists it, and the child's session, which takes
	// the answer. RequestID is then "PATH:ID", ID being the child's own.
	Path      string `json:"path,omitempty"`
	SessionID string `json:"session_id,omitempty"`
}

// ChildRef names a child session a run waits for.
type ChildRef struct {
	ToolCallID string `json:"tool_call_id"`
	Agent      string `json:"agent"`
	Path       string `json:"path"`
	SessionID  string `json:"session_id"`
}

// MaxPageBytes bounds the events or messages of one query answer (by
// their JSON size), well under Temporal's payload limits (2 MB), so no
// page of a session however large can fail to be returned. A page holds
// at least one item: a single event or message is smaller than this.
const MaxPageBytes = 1 << 20
