package api

import (
	"encoding/json"
	"strconv"

	"github.com/keelrun/keel"
)

// An eval (docs/evals.md, docs/contract.md §24) runs cases as sessions of
// their own under a candidate's run configuration, and a baseline's, and
// scores what each run did. It is the Eval workflow (ID EvalIDPrefix +
// the eval's ID): its input is an EvalInput, its "state" query answers
// an EvalStatus, and its result is an EvalReport.

// Names of the eval's workflow.
const (
	// EvalWorkflowName is the workflow type of an eval.
	EvalWorkflowName = "Eval"
	// EvalIDPrefix starts the workflow ID of every eval.
	EvalIDPrefix = "keel-eval:"
)

// Limits of an eval: an eval's input is workflow input, and every case
// a session, so each bound is a named constant and refused with a typed
// error (keel.CodeTooLarge or keel.CodeInvalidInput).
const (
	// MaxEvalCases bounds the cases of one eval, recorded runs included.
	MaxEvalCases = 1000
	// MaxEvalSessions bounds the recorded sessions one eval replays.
	MaxEvalSessions = 100
	// MaxEvalConcurrency bounds the cases that run at once;
	// DefaultEvalConcurrency is the default.
	MaxEvalConcurrency     = 64
	DefaultEvalConcurrency = 4
	// MaxEvalPatternBytes bounds an expected pattern, text or rubric.
	MaxEvalPatternBytes = 4 << 10
	// MaxEvalExpectations bounds the strings, tool calls and argument
	// matchers of one case's expectations, each list on its own.
	MaxEvalExpectations = 32
	// MaxEvalAnswerBytes bounds the answer a report keeps of each run;
	// a longer one is cut, and scored whole.
	MaxEvalAnswerBytes = 16 << 10
	// MaxEvalConversation bounds the turns of a case's conversation;
	// MaxEvalConversationBytes their text together. A dataset line holds
	// a case's prompt and conversation together within
	// MaxDatasetLineBytes.
	MaxEvalConversation      = 64
	MaxEvalConversationBytes = MaxPromptBytes
)

// EvalInput is what an eval runs: the input of the Eval workflow.
type EvalInput struct {
	// ID names the eval: letters, digits, '-' and '_' (a session ID's
	// form), since its cases' session IDs start with it.
	ID string `json:"id"`
	// Cases are dataset cases (ReadDataset).
	Cases []EvalCase `json:"cases,omitempty"`
	// Sessions are recorded sessions: each of their committed runs is a
	// case, forked at the point before it, so the candidate sees the
	// history the original run saw, and the original is its baseline.
	Sessions []string `json:"sessions,omitempty"`
	// SessionPrefix adds the recorded sessions whose IDs start with it
	// (child sessions and this eval's own left out), up to
	// MaxEvalSessions in all. Optional.
	SessionPrefix string `json:"session_prefix,omitempty"`
	// Candidate is the run configuration under test.
	Candidate RunConfig `json:"candidate"`
	// Baseline, when set, runs every dataset case a second time under
	// it. Recorded runs are their own baseline. Optional.
	Baseline *RunConfig `json:"baseline,omitempty"`
	// Judge, when set, asks a model of the worker's to grade each run
	// against its case's rubric. Optional.
	Judge *EvalJudge `json:"judge,omitempty"`
	// Concurrency is how many cases run at once. Default
	// DefaultEvalConcurrency, at most MaxEvalConcurrency.
	Concurrency int `json:"concurrency,omitempty"`
	// Budget bounds what the eval's runs (and its judge's) spend
	// together: once it is spent no case starts, and those left are
	// reported as skipped. Optional.
	Budget *Budget `json:"budget,omitempty"`
}

// EvalJudge is a model that grades runs against a rubric. Its runs are
// sessions of their own, whose cost the eval counts; a verdict that
// is not the JSON it asks for is a malformed response, retried as any
// (docs/contract.md §4.2), and a judge that never gives one scores the
// case as an error, never as a pass.
type EvalJudge struct {
	// Model is a model spec the worker offers.
	Model string `json:"model"`
	// Rubric is what the judge grades by, for cases that give none.
	Rubric string `json:"rubric,omitempty"`
}

// EvalCase is one case: a prompt to run, or a recorded run to replay,
// and what its run is expected to do.
type EvalCase struct {
	// ID names the case in the report; unique within the eval. A
	// dataset line without one is "line-N".
	ID string `json:"id,omitempty"`
	// Prompt is the prompt the case sends.
	Prompt string `json:"prompt,omitempty"`
	// Attachments go with the prompt: references to the content store
	// (client.Attach, POST /v1/attachments), never paths or URLs.
	Attachments []keel.Attachment `json:"attachments,omitempty"`
	// Conversation is what the case's session says before its prompt:
	// turns of plain text, a user's first, user and assistant in turn,
	// an assistant's last (CheckConversation). Each side's session
	// starts with it as its transcript. Optional; never with From.
	Conversation []EvalTurn `json:"conversation,omitempty"`
	// Expect says what the run must do. Optional: a case without
	// expectations passes when its run completes.
	Expect EvalExpect `json:"expect,omitzero"`
	// From is the recorded run the case replays; the eval sets it.
	From *EvalSource `json:"from,omitempty"`
}

// EvalTurn is one turn of a case's conversation: a keel.Message of role
// "user" or "assistant" that has only text.
type EvalTurn struct {
	Role    keel.Role `json:"role"`
	Content string    `json:"content"`
}

// Messages returns the conversation as a transcript.
func (c EvalCase) Messages() []keel.Message {
	if len(c.Conversation) == 0 {
		return nil
	}
	msgs := make([]keel.Message, len(c.Conversation))
	for i, t := range c.Conversation {
		msgs[i] = keel.Message{Role: t.Role, Content: t.Content}
	}
	return msgs
}

// EvalSource is a recorded run: run Run of session Session.
type EvalSource struct {
	Session string `json:"session"`
	Run     int    `json:"run"`
}

// EvalExpect is what a case expects of its run. Every field is optional;
// each set field is one deterministic scorer, and Rubric asks the judge.
type EvalExpect struct {
	// Exact is the whole answer, compared after trimming space.
	Exact *string `json:"exact,omitempty"`
	// Contains are strings the answer must each contain.
	Contains []string `json:"contains,omitempty"`
	// Regex is an RE2 expression the answer must match.
	Regex string `json:"regex,omitempty"`
	// Schema is a JSON Schema the answer must match.
	Schema json.RawMessage `json:"schema,omitempty"`
	// Tools are calls the run must make, in any order.
	Tools []ToolExpect `json:"tools,omitempty"`
	// NoTools are tools the run must not call; "*" is any tool.
	NoTools []string `json:"no_tools,omitempty"`
	// MaxCost bounds the run's cost, in MaxCostCurrency (default USD).
	MaxCost         float64 `json:"max_cost,omitempty"`
	MaxCostCurrency string  `json:"max_cost_currency,omitempty"`
	// MaxTokens bounds the run's input and output tokens together.
	MaxTokens int64 `json:"max_tokens,omitempty"`
	// MaxDuration bounds the run's duration, from its first event to
	// its last.
	MaxDuration keel.Duration `json:"max_duration,omitempty"`
	// Rubric is what the eval's judge grades this case's answer by.
	Rubric string `json:"rubric,omitempty"`
}

// ToolExpect is a tool call a run must make: a call of Name whose
// arguments match every matcher of Args, by top-level argument name.
type ToolExpect struct {
	Name string              `json:"name"`
	Args map[string]ArgMatch `json:"args,omitempty"`
}

// ArgMatch matches one argument: set one of its fields.
type ArgMatch struct {
	// Equals is the argument's JSON value.
	Equals json.RawMessage `json:"equals,omitempty"`
	// Contains is a string the argument (a string) contains.
	Contains string `json:"contains,omitempty"`
	// Regex is an RE2 expression the argument (a string) matches.
	Regex string `json:"regex,omitempty"`
}

// EvalCaseSessionID is the session ID of a case's run on one side
// ("c" the candidate, "b" the baseline, "cj"/"bj" their judge): derived
// from the eval and the case's number, so that a retried activity finds
// the session its first attempt made.
func EvalCaseSessionID(evalID string, caseIndex int, side string) string {
	return evalID + "-" + strconv.Itoa(caseIndex+1) + "-" + side
}
