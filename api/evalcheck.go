package api

import (
	"encoding/json"
	"regexp"
	"strings"

	"github.com/keelrun/keel"
)

// The checks of what a caller sends an eval (docs/contract.md §24.6):
// every limit a named constant of eval.go, every refusal a typed error.

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
	if len(c.Conversation) > 0 && c.From != nil {
		return keel.Errorf(keel.CodeInvalidInput, "conversation: a recorded run's case has the history it had")
	}
	if err := CheckConversation(c.Messages()); err != nil {
		return err
	}
	return c.Expect.Validate()
}

// CheckConversation checks a conversation a session starts with (an
// eval case's, docs/contract.md §24.1): at most MaxEvalConversation
// messages of at most MaxEvalConversationBytes of text together, each
// only text that is not blank; a user's first, then an assistant's and
// a user's in turn, and an assistant's last, so that the prompt sent
// next follows it as a user's turn. Anything else (a tool call or
// result, an attachment, reasoning) is refused: keel.CodeTooLarge over
// a limit, keel.CodeInvalidInput otherwise. An empty conversation
// passes. The Session workflow checks a conversation with it as it
// starts, so a change to what it refuses is a change of workflow code
// (docs/operations.md, "Workflows change only behind GetVersion").
func CheckConversation(msgs []keel.Message) error {
	if len(msgs) > MaxEvalConversation {
		return keel.Errorf(keel.CodeTooLarge, "conversation: %d turns; the limit is %d", len(msgs), MaxEvalConversation)
	}
	size := 0
	for i, m := range msgs {
		want := keel.RoleUser
		if i%2 == 1 {
			want = keel.RoleAssistant
		}
		if m.Role != want {
			return keel.Errorf(keel.CodeInvalidInput, "conversation[%d]: role %q; want %q (a user's turn first, then an assistant's and a user's in turn)",
				i, clipText(string(m.Role), 32), want)
		}
		if strings.TrimSpace(m.Content) == "" {
			return keel.Errorf(keel.CodeInvalidInput, "conversation[%d]: empty", i)
		}
		if len(m.ToolCalls) > 0 || m.ToolCallID != "" || m.ToolName != "" || m.ToolStatus != "" || m.Aborted ||
			m.SteeringID != "" || m.InputID != "" || m.CompactedTurns != 0 || len(m.Reasoning) > 0 || len(m.Attachments) > 0 {
			return keel.Errorf(keel.CodeInvalidInput, "conversation[%d]: a turn is a role and its text, nothing else", i)
		}
		if size += len(m.Content); size > MaxEvalConversationBytes {
			return keel.Errorf(keel.CodeTooLarge, "conversation: over %d bytes of text", MaxEvalConversationBytes)
		}
	}
	if len(msgs)%2 == 1 {
		return keel.Errorf(keel.CodeInvalidInput, "conversation: ends with a user's turn; it must end with an assistant's, which the case's prompt follows")
	}
	return nil
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
