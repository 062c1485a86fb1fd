package transcript

import (
	"encoding/json"

	"github.com/keelrun/keel"
)

// Limits of what the view keeps. Change.Text is never cut.
const (
	// MaxText bounds the text and the reasoning kept for one step, and
	// the arguments kept for one tool-call draft.
	MaxText = 4 << 20
	// MaxField bounds every other string the view keeps (a prompt, a
	// tool's output, a question, a steering text); JSON values over it
	// (arguments, schemas) are kept as null.
	MaxField = 256 << 10
	// MaxURLs bounds the URLs kept for one use of a hosted tool; they
	// are also kept only while their bytes together fit in MaxField.
	MaxURLs = 100
)

// View is what a transcript holds: its runs in the order they appeared,
// the last durable sequence applied, and the events that changed nothing,
// counted by reason. Its JSON form is the one testdata/*.view.json hold.
type View struct {
	LastSeq int64          `json:"last_seq"`
	Ignored map[Reason]int `json:"ignored"`
	Runs    []*Run         `json:"runs"`
	// Forked is where the session was forked from (its session.forked
	// event), and Rewinds its session.rewound events in order: facts of
	// the session that belong to no run (docs/contract.md §19).
	Forked  *keel.SessionForked   `json:"forked,omitempty"`
	Rewinds []keel.SessionRewound `json:"rewinds,omitempty"`
}

// Status is a run's state in the view.
type Status string

// The statuses of a run.
const (
	Running             Status = "running"
	WaitingForHostInput Status = "waiting_for_host_input"
	Completed           Status = "completed"
	Cancelled           Status = "cancelled"
	Failed              Status = "failed"
)

// Ended reports whether s is a terminal status.
func (s Status) Ended() bool { return s == Completed || s == Cancelled || s == Failed }

// Run is one run as the view shows it. A Transcript owns its runs and
// changes them as events come: read them, never write them.
type Run struct {
	ID string `json:"id"`
	// Number, Prompt and Model come from run.started; they are empty for
	// a run first seen mid-way.
	Number int    `json:"number"`
	Prompt string `json:"prompt"`
	Model  string `json:"model"`
	Status Status `json:"status"`
	// Steps are the run's model turns in the order they started; the
	// last is the current one.
	Steps []*Step `json:"steps"`
	// Tools are the run's tool calls in the order they appeared.
	Tools []*Tool `json:"tools"`
	// Questions are the host-input requests in the order they were asked.
	Questions []*Question `json:"questions"`
	// Steering is the steering the run accepted, in order.
	Steering []*Steering `json:"steering"`
	// Usage is the running total of the run's provider requests,
	// abandoned ones included (usage.updated).
	Usage Usage `json:"usage"`
	// Compactions counts completed compactions.
	Compactions int `json:"compactions"`
	// Result is set by the terminal event.
	Result *Result `json:"result"`
	// Warnings are the run's budget.warning events in order: a budget of
	// the run or of the session that reached its warning fraction
	// (docs/contract.md §20). A run that a budget stopped ends with
	// run.failed, code keel.BudgetExceeded.
	Warnings []keel.BudgetWarning `json:"warnings,omitempty"`
	// Agents are the run's children, in the order they started
	// (docs/contract.md §21.3).
	Agents []*Agent `json:"agents,omitempty"`

	started   bool
	agents    map[string]*Agent
	steps     map[int]*Step
	tools     map[string]*Tool
	questions map[string]*Question
	steering  map[string]*Steering
}

// Step returns step n of the run, nil if it has not started.
func (r *Run) Step(n int) *Step { return r.steps[n] }

// Current returns the step under way (the last started), nil before the
// first.
func (r *Run) Current() *Step {
	if len(r.Steps) == 0 {
		return nil
	}
	return r.Steps[len(r.Steps)-1]
}

// Tool returns the card of a tool call, nil if none.
func (r *Run) Tool(id string) *Tool { return r.tools[id] }

// Question returns a host-input request, nil if none.
func (r *Run) Question(id string) *Question { return r.questions[id] }

// Open reports how many host-input questions wait for an answer.
func (r *Run) Open() int {
	n := 0
	for _, q := range r.Questions {
		if q.State == QuestionOpen {
			n++
		}
	}
	return n
}

// Result is how a run ended: Text, Steps and Usage (the kept usage) of
// run.completed, Code, Message and Retryable of run.failed, and the
// revision every terminal event carries.
type Result struct {
	Text      string    `json:"text"`
	Steps     int       `json:"steps"`
	Usage     Usage     `json:"usage"`
	Code      keel.Code `json:"code"`
	Message   string    `json:"message"`
	Retryable bool      `json:"retryable"`
	Revision  int64     `json:"revision"`
}

// Step is one model turn: the output of its live attempt so far.
type Step struct {
	Number                 int `json:"number"`
	EstimatedContextTokens int `json:"estimated_context_tokens"`
	// Attempt is the live attempt, 1 at first; Text, Reasoning and
	// Drafts are its output so far.
	Attempt   int      `json:"attempt"`
	Text      string   `json:"text"`
	Reasoning string   `json:"reasoning"`
	Drafts    []*Draft `json:"drafts"`
	// Abandoned lists the attempts reset, in the order of their resets.
	Abandoned []int `json:"abandoned"`
	// Completed says the live attempt's response is complete
	// (model_call.completed): no delta counts after it.
	Completed bool `json:"completed"`
	// Truncated says Text, Reasoning or a draft reached MaxText.
	Truncated bool `json:"truncated"`
	// Waiting is set while the live attempt waits for its turn under a
	// rate limit (model.waiting, docs/contract.md §20.5): until its first
	// delta, its response, a reset or the run's end.
	Waiting *Waiting `json:"waiting,omitempty"`
	// Hosted are the uses of tools the model's backend ran itself (web
	// search, code execution, ...; hosted_tool.activity) in the order
	// they were reported: those of the live attempt, and of a later one
	// reported before it streamed.
	Hosted []*Hosted `json:"hosted"`

	abandonedMax int
}

// Waiting is what a step waits for before its request is sent: the rate
// limit it waits under (a provider, "provider:model" or a model spec) and
// how long it was told to wait, in whole milliseconds, from the event.
type Waiting struct {
	Limit  string `json:"limit"`
	WaitMS int64  `json:"wait_ms"`
}

// Hosted is one use of a tool the model's backend ran itself, as its
// hosted_tool.activity reported it: the tool's name, the backend's ID of
// the use ("" when it gave none), its short account (Detail) and, for a
// web search, the query and the URLs of its results. URLs past MaxURLs,
// or past MaxField bytes together, are left out and Truncated says so.
type Hosted struct {
	Attempt   int      `json:"attempt"`
	Name      string   `json:"name"`
	ID        string   `json:"id"`
	Detail    string   `json:"detail"`
	Query     string   `json:"query"`
	URLs      []string `json:"urls"`
	Truncated bool     `json:"truncated,omitempty"`
}

// Draft is a tool call the live attempt is streaming (tool_call.delta),
// until tool.proposed brings the complete call.
type Draft struct {
	Index     int    `json:"index"`
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ToolState is a tool card's state: proposed, running, detached, or the
// status of its tool.finished (ok, error, unavailable, interrupted).
type ToolState string

// The states of a tool card before it finishes.
const (
	ToolProposed ToolState = "proposed"
	ToolRunning  ToolState = "running"
	ToolDetached ToolState = "detached"
)

// Tool is the card of one tool call.
type Tool struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Step is the step that proposed the call (the current step for a
	// call first seen without tool.proposed).
	Step      int             `json:"step"`
	Arguments json.RawMessage `json:"arguments"`
	State     ToolState       `json:"state"`
	// Progress is the last progress note while the call runs.
	Progress string `json:"progress"`
	// Output is the result the model sees, once the call finished.
	Output string `json:"output"`
	// Finished says State is the call's final status.
	Finished bool `json:"finished"`
}

// QuestionState is a host-input request's state.
type QuestionState string

// The states of a question.
const (
	QuestionOpen        QuestionState = "open"
	QuestionAnswered    QuestionState = "answered"
	QuestionInterrupted QuestionState = "interrupted"
)

// Question is a host-input request of a tool call.
type Question struct {
	RequestID  string          `json:"request_id"`
	ToolCallID string          `json:"tool_call_id"`
	Prompt     string          `json:"prompt"`
	Schema     json.RawMessage `json:"schema"`
	State      QuestionState   `json:"state"`
}

// SteeringState is a steering input's state.
type SteeringState string

// The states of steering.
const (
	SteeringStaged    SteeringState = "staged"
	SteeringApplied   SteeringState = "applied"
	SteeringRetracted SteeringState = "retracted"
)

// Steering is one accepted steering input.
type Steering struct {
	ID    string        `json:"id"`
	Text  string        `json:"text"`
	State SteeringState `json:"state"`
}

// Usage is keel.Usage with every field in its JSON form, so views compare
// field by field.
type Usage struct {
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	CacheReadTokens  int64 `json:"cache_read_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens"`
	ReasoningTokens  int64 `json:"reasoning_tokens"`
	WebSearches      int64 `json:"web_searches"`
	Requests         int   `json:"requests"`
	// Cost and Unpriced appear only when a request had a price or lacked
	// one (docs/contract.md §20): usage recorded before prices has
	// neither.
	Cost     keel.Costs `json:"cost,omitempty"`
	Unpriced int        `json:"unpriced,omitempty"`
}

func usageOf(u keel.Usage) Usage {
	return Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CacheReadTokens: u.CacheReadTokens,
		CacheWriteTokens: u.CacheWriteTokens, ReasoningTokens: u.ReasoningTokens, WebSearches: u.WebSearches,
		Requests: u.Requests, Cost: u.Cost, Unpriced: u.Unpriced}
}

// Keel returns u as a keel.Usage.
func (u Usage) Keel() keel.Usage {
	return keel.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CacheReadTokens: u.CacheReadTokens,
		CacheWriteTokens: u.CacheWriteTokens, ReasoningTokens: u.ReasoningTokens, WebSearches: u.WebSearches,
		Requests: u.Requests, Cost: u.Cost, Unpriced: u.Unpriced}
}
