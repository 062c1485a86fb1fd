package api

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"

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
	// Expect says what the run must do. Optional: a case without
	// expectations passes when its run completes.
	Expect EvalExpect `json:"expect,omitzero"`
	// From is the recorded run the case replays; the eval sets it.
	From *EvalSource `json:"from,omitempty"`
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

// Validate checks an eval's input as a caller wrote it, before it
// starts: a client checks it, and the workflow again (it trusts no
// caller).
func (in EvalInput) Validate() error {
	if err := keel.ValidateSessionID(in.ID); err != nil || len(in.ID) > MaxEvalIDLength {
		return keel.Errorf(keel.CodeInvalidInput, "eval ID: 1 to %d letters, digits, '-' and '_'", MaxEvalIDLength)
	}
	switch {
	case len(in.Cases) == 0 && len(in.Sessions) == 0 && in.SessionPrefix == "":
		return keel.Errorf(keel.CodeInvalidInput, "an eval needs cases or recorded sessions")
	case len(in.Cases) > MaxEvalCases:
		return keel.Errorf(keel.CodeTooLarge, "%d cases; an eval takes at most %d", len(in.Cases), MaxEvalCases)
	case len(in.Sessions) > MaxEvalSessions:
		return keel.Errorf(keel.CodeTooLarge, "%d sessions; an eval replays at most %d", len(in.Sessions), MaxEvalSessions)
	case in.Concurrency < 0 || in.Concurrency > MaxEvalConcurrency:
		return keel.Errorf(keel.CodeInvalidInput, "concurrency must be 1 to %d, got %d", MaxEvalConcurrency, in.Concurrency)
	}
	if in.SessionPrefix != "" {
		if err := keel.ValidateSessionID(in.SessionPrefix); err != nil {
			return keel.Errorf(keel.CodeInvalidInput, "session_prefix: letters, digits, '-' and '_'")
		}
	}
	for _, s := range in.Sessions {
		if err := keel.ValidateSessionID(s); err != nil {
			return err
		}
	}
	if in.Judge != nil {
		if in.Judge.Model == "" || len(in.Judge.Model) > MaxEvalPatternBytes || len(in.Judge.Rubric) > MaxEvalPatternBytes {
			return keel.Errorf(keel.CodeInvalidInput, "judge: a model, and a rubric of at most %d bytes", MaxEvalPatternBytes)
		}
	}
	if err := in.Budget.Validate("budget"); err != nil {
		return err
	}
	seen := make(map[string]bool, len(in.Cases))
	for i, c := range in.Cases {
		if err := c.Validate(); err != nil {
			return prefixed(err, "case %d", i+1)
		}
		if seen[c.ID] {
			return keel.Errorf(keel.CodeInvalidInput, "case %d: ID %q is taken by an earlier case", i+1, c.ID)
		}
		seen[c.ID] = true
	}
	return nil
}

// MaxEvalIDLength bounds an eval's ID, so that its cases' session IDs
// (ID, case number, side) stay within keel.MaxIDLength.
const MaxEvalIDLength = 64

// Validate checks one case: a prompt within MaxPromptBytes, attachments
// that are content-store references, and expectations within their
// limits that compile.
func (c EvalCase) Validate() error {
	if c.ID == "" || len(c.ID) > MaxEvalPatternBytes/16 || strings.ContainsFunc(c.ID, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return keel.Errorf(keel.CodeInvalidInput, "id: 1 to %d printable bytes", MaxEvalPatternBytes/16)
	}
	if c.From == nil && strings.TrimSpace(c.Prompt) == "" {
		return keel.Errorf(keel.CodeInvalidInput, "prompt: empty")
	}
	if len(c.Prompt) > MaxPromptBytes {
		return keel.Errorf(keel.CodeTooLarge, "prompt: %d bytes; the limit is %d", len(c.Prompt), MaxPromptBytes)
	}
	if len(c.Attachments) > keel.MaxAttachments {
		return keel.Errorf(keel.CodeTooLarge, "attachments: %d; the limit is %d", len(c.Attachments), keel.MaxAttachments)
	}
	for i, a := range c.Attachments {
		if err := a.Validate(); err != nil {
			return prefixed(err, "attachment %d", i+1)
		}
	}
	return c.Expect.Validate()
}

// Validate checks expectations: their sizes and that their patterns and
// schema compile.
func (e EvalExpect) Validate() error {
	if len(e.Contains) > MaxEvalExpectations || len(e.Tools) > MaxEvalExpectations || len(e.NoTools) > MaxEvalExpectations {
		return keel.Errorf(keel.CodeTooLarge, "expect: at most %d strings or tools a list", MaxEvalExpectations)
	}
	texts := append([]string{e.Regex, e.Rubric, e.MaxCostCurrency}, e.Contains...)
	texts = append(texts, e.NoTools...)
	if e.Exact != nil {
		texts = append(texts, *e.Exact)
	}
	for _, t := range texts {
		if len(t) > MaxEvalPatternBytes {
			return keel.Errorf(keel.CodeTooLarge, "expect: a string of %d bytes; the limit is %d", len(t), MaxEvalPatternBytes)
		}
	}
	if err := checkRegex("expect.regex", e.Regex); err != nil {
		return err
	}
	if len(e.Schema) > 0 {
		if err := CheckOutputSchema(e.Schema); err != nil {
			return prefixed(err, "expect.schema")
		}
	}
	if e.MaxCost < 0 || e.MaxTokens < 0 || e.MaxDuration < 0 {
		return keel.Errorf(keel.CodeInvalidInput, "expect: limits must be 0 or more")
	}
	for i, t := range e.Tools {
		if t.Name == "" || len(t.Name) > keel.MaxIDLength || len(t.Args) > MaxEvalExpectations {
			return keel.Errorf(keel.CodeInvalidInput, "expect.tools[%d]: a tool's name and at most %d argument matchers", i, MaxEvalExpectations)
		}
		for name, m := range t.Args {
			if len(name) > MaxEvalPatternBytes/16 || len(m.Equals) > MaxEvalPatternBytes || len(m.Contains) > MaxEvalPatternBytes {
				return keel.Errorf(keel.CodeTooLarge, "expect.tools[%d].args: a matcher over its limits", i)
			}
			if len(m.Equals) > 0 && !json.Valid(m.Equals) {
				return keel.Errorf(keel.CodeInvalidInput, "expect.tools[%d].args.%s.equals: not JSON", i, name)
			}
			if err := checkRegex("expect.tools.args.regex", m.Regex); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkRegex(what, expr string) error {
	if expr == "" {
		return nil
	}
	if len(expr) > MaxEvalPatternBytes {
		return keel.Errorf(keel.CodeTooLarge, "%s: %d bytes; the limit is %d", what, len(expr), MaxEvalPatternBytes)
	}
	if _, err := regexp.Compile(expr); err != nil {
		return keel.Errorf(keel.CodeInvalidInput, "%s: %v", what, err)
	}
	return nil
}

// prefixed returns err with what in front of its message, keeping its
// code.
func prefixed(err error, format string, args ...any) error {
	ke, ok := err.(*keel.Error)
	if !ok {
		return err
	}
	return keel.Errorf(ke.Code, format+": %s", append(args, ke.Message)...)
}

// EvalCaseSessionID is the session ID of a case's run on one side
// ("c" the candidate, "b" the baseline, "cj"/"bj" their judge): derived
// from the eval and the case's number, so that a retried activity finds
// the session its first attempt made.
func EvalCaseSessionID(evalID string, caseIndex int, side string) string {
	return evalID + "-" + strconv.Itoa(caseIndex+1) + "-" + side
}
