package keel

import (
	"encoding/json"
	"errors"
)

// This file holds what a run comes to and what a session is doing: the
// authoritative Outcome of a run and its status, the usage it counts, and
// the session's observed state (docs/contract.md §3 and §10).

// Outcome is the authoritative result of a run.
type Outcome struct {
	RunID    string    `json:"run_id"`
	Number   int       `json:"number"`
	Status   RunStatus `json:"status"`
	Text     string    `json:"text,omitempty"`
	Steps    int       `json:"steps"`
	Revision int64     `json:"revision"`
	// Usage is the usage of the successful responses; UsageTotal adds the
	// abandoned attempts, which are billed too.
	Usage      Usage  `json:"usage"`
	UsageTotal Usage  `json:"usage_total"`
	Error      *Error `json:"error,omitempty"`
	// Seq is the sequence number of the run's terminal event in the
	// session's log (0 in an outcome read from the session's closed
	// state, for a run that has none).
	Seq int64 `json:"seq,omitempty"`
	// TextCut says Text is only the first api.MaxOutcomeText bytes of the
	// final text, as the session's outcome update answers a longer one so
	// that the answer stays plain JSON for any Temporal SDK: the whole
	// text is in the terminal event at Seq. keel's client never returns a
	// cut outcome.
	TextCut bool `json:"text_cut,omitempty"`
	// Answer is the final answer as JSON, for a run whose configuration
	// set an output schema: it matched that schema (docs/contract.md
	// §21.1), and Text holds the same answer as the model wrote it. Nil
	// for a run without a schema, and for one that did not complete. It
	// is left out, with TextCut, where Text is cut.
	Answer json.RawMessage `json:"answer,omitempty"`
}

// ErrNoAnswer is DecodeAnswer's error for an outcome without a structured
// answer: the run set no output schema, or did not complete.
var ErrNoAnswer = errors.New("keel: the outcome has no structured answer")

// DecodeAnswer decodes the run's structured answer (Answer) into v, a
// pointer to a value of the type the run's output schema describes, such
// as a struct:
//
//	var facts struct{ Facts []string `json:"facts"` }
//	err := out.DecodeAnswer(&facts)
//
// It returns ErrNoAnswer when there is none.
func (o Outcome) DecodeAnswer(v any) error {
	if len(o.Answer) == 0 {
		return ErrNoAnswer
	}
	return json.Unmarshal(o.Answer, v)
}

// Err returns nil for a completed run, ErrCancelled for a cancelled one, and
// the typed failure otherwise.
func (o Outcome) Err() error {
	switch o.Status {
	case StatusCompleted, StatusActive:
		return nil
	case StatusCancelled:
		return ErrCancelled
	}
	if o.Error != nil {
		return o.Error
	}
	return &Error{Code: CodeInternal, Message: "run failed without a recorded error"}
}

// RunStatus is how a run ended, or that it has not.
type RunStatus string

// The statuses of a run.
const (
	StatusActive    RunStatus = "active"
	StatusCompleted RunStatus = "completed"
	StatusCancelled RunStatus = "cancelled"
	StatusFailed    RunStatus = "failed"
)

// Usage counts tokens and physical provider requests.
type Usage struct {
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	CacheReadTokens  int64 `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
	// ReasoningTokens is the part of OutputTokens the provider reported as
	// reasoning; OutputTokens always keeps the provider's full total.
	ReasoningTokens int64 `json:"reasoning_tokens,omitempty"`
	// WebSearches counts the searches the backend's hosted web search
	// made, which it bills per search.
	WebSearches int64 `json:"web_searches,omitempty"`
	// Requests is the number of physical provider requests counted.
	Requests int `json:"requests"`
	// Cost is what the requests cost by the worker's price table, one
	// entry per currency (docs/contract.md §20). Empty when none had a
	// price: keel never makes one up.
	Cost Costs `json:"cost,omitempty"`
	// Unpriced counts the requests whose model had no price: their tokens
	// are counted, their cost is not, so Cost is then a lower bound.
	Unpriced int `json:"unpriced,omitempty"`
}

// Add returns the sum of u and o; token counts and costs saturate rather
// than wrap.
func (u Usage) Add(o Usage) Usage {
	return Usage{
		InputTokens:      addSaturating(u.InputTokens, o.InputTokens),
		OutputTokens:     addSaturating(u.OutputTokens, o.OutputTokens),
		CacheReadTokens:  addSaturating(u.CacheReadTokens, o.CacheReadTokens),
		CacheWriteTokens: addSaturating(u.CacheWriteTokens, o.CacheWriteTokens),
		ReasoningTokens:  addSaturating(u.ReasoningTokens, o.ReasoningTokens),
		WebSearches:      addSaturating(u.WebSearches, o.WebSearches),
		Requests:         u.Requests + o.Requests,
		Cost:             u.Cost.Add(o.Cost),
		Unpriced:         u.Unpriced + o.Unpriced,
	}
}

// Tokens returns the tokens u counts, prompt and answer (saturating).
func (u Usage) Tokens() int64 { return addSaturating(u.InputTokens, u.OutputTokens) }

// MaxRequestTokens is the most tokens of one kind (prompt, cache reads,
// cache writes, answer, reasoning) keel counts for one provider request:
// 2^31, hundreds of times any model's context. A provider's usage report
// is a model's input like any other (docs/contract.md §20.6): a count
// above it is counted as it, and a negative count as 0, so no report can
// overflow a sum, make a cost negative or give a budget back.
const MaxRequestTokens = 1 << 31

// Bounded returns u with each token count within 0 and MaxRequestTokens.
func (u Usage) Bounded() Usage {
	clamp := func(n int64) int64 { return min(max(n, 0), MaxRequestTokens) }
	u.InputTokens, u.OutputTokens = clamp(u.InputTokens), clamp(u.OutputTokens)
	u.CacheReadTokens, u.CacheWriteTokens = clamp(u.CacheReadTokens), clamp(u.CacheWriteTokens)
	u.ReasoningTokens, u.WebSearches = clamp(u.ReasoningTokens), clamp(u.WebSearches)
	return u
}

// IsZero reports whether u counts nothing.
func (u Usage) IsZero() bool {
	return u.InputTokens == 0 && u.OutputTokens == 0 && u.CacheReadTokens == 0 && u.CacheWriteTokens == 0 &&
		u.ReasoningTokens == 0 && u.WebSearches == 0 && u.Requests == 0 && len(u.Cost) == 0 && u.Unpriced == 0
}

// SessionState is what a session is doing. It is an observation, not a lock:
// use run outcomes and revisions for decisions.
type SessionState string

// The states of a session. Completed and Failed stay until the next run
// starts; a cancelled run returns the session to Idle. Terminated (and
// Failed, for a session whose workflow itself failed) is final.
const (
	StateIdle                SessionState = "idle"
	StateRunning             SessionState = "running"
	StateWaitingForHostInput SessionState = "waiting_for_host_input"
	StateCancelling          SessionState = "cancelling"
	StateCompleted           SessionState = "completed"
	StateFailed              SessionState = "failed"
	// StateTerminated is a session whose workflow was stopped from
	// outside (an operator, or a Temporal limit): it takes no more
	// prompts, and its events and transcript stay readable.
	StateTerminated SessionState = "terminated"
)

// Active reports whether a run is in progress in this state.
func (s SessionState) Active() bool {
	return s == StateRunning || s == StateWaitingForHostInput || s == StateCancelling
}
