package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/server/tool"
)

// The deterministic scorers of EvalExpect. Their patterns and schema
// were checked by EvalExpect.Validate before the eval started; each
// compiles again here, and an error is the scorer's, never a pass.

type exact string

func (exact) Name() string { return "exact" }

func (e exact) Score(_ context.Context, _ api.EvalCase, run api.EvalRun) (api.EvalScore, error) {
	ok := strings.TrimSpace(run.Answer) == strings.TrimSpace(string(e))
	return Verdict("exact", ok, ifElse(ok, "the answer is the expected one", "the answer differs from the expected one")), nil
}

type contains []string

func (contains) Name() string { return "contains" }

func (c contains) Score(_ context.Context, _ api.EvalCase, run api.EvalRun) (api.EvalScore, error) {
	var missing []string
	for _, s := range c {
		if !strings.Contains(run.Answer, s) {
			missing = append(missing, fmt.Sprintf("%q", clip(s, 80)))
		}
	}
	return Verdict("contains", len(missing) == 0, ifElse(len(missing) == 0, "contains every expected string",
		"missing "+strings.Join(missing, ", "))), nil
}

type pattern string

func (pattern) Name() string { return "regex" }

func (p pattern) Score(_ context.Context, _ api.EvalCase, run api.EvalRun) (api.EvalScore, error) {
	re, err := regexp.Compile(string(p))
	if err != nil {
		return api.EvalScore{}, fmt.Errorf("regex: %w", err)
	}
	ok := re.MatchString(run.Answer)
	return Verdict("regex", ok, ifElse(ok, "matches", "does not match")+" "+clip(string(p), 80)), nil
}

type schema json.RawMessage

func (schema) Name() string { return "schema" }

func (s schema) Score(_ context.Context, _ api.EvalCase, run api.EvalRun) (api.EvalScore, error) {
	err := tool.ValidateJSON(json.RawMessage(s), json.RawMessage(strings.TrimSpace(run.Answer)))
	var bad *tool.InvalidValueError
	switch {
	case err == nil:
		return Verdict("schema", true, "the answer matches the schema"), nil
	case errors.As(err, &bad):
		return Verdict("schema", false, clip(strings.Join(bad.Problems, "; "), 300)), nil
	}
	return api.EvalScore{}, fmt.Errorf("schema: %w", err)
}

type toolCalls []api.ToolExpect

func (toolCalls) Name() string { return "tools" }

func (t toolCalls) Score(_ context.Context, _ api.EvalCase, run api.EvalRun) (api.EvalScore, error) {
	var missing []string
	for _, want := range t {
		if !slices.ContainsFunc(run.Tools, func(c api.EvalToolCall) bool { return callMatches(want, c) }) {
			missing = append(missing, want.Name)
		}
	}
	return Verdict("tools", len(missing) == 0, ifElse(len(missing) == 0, "made every expected call",
		"no matching call of "+strings.Join(missing, ", "))), nil
}

// callMatches reports whether call is of want's tool with arguments that
// match each of want's matchers.
func callMatches(want api.ToolExpect, call api.EvalToolCall) bool {
	if call.Name != want.Name {
		return false
	}
	if len(want.Args) == 0 {
		return true
	}
	var args map[string]json.RawMessage
	if json.Unmarshal(call.Arguments, &args) != nil {
		return false
	}
	for name, m := range want.Args {
		v, ok := args[name]
		if !ok || !argMatches(m, v) {
			return false
		}
	}
	return true
}

func argMatches(m api.ArgMatch, v json.RawMessage) bool {
	if len(m.Equals) > 0 {
		var a, b any
		if json.Unmarshal(m.Equals, &a) != nil || json.Unmarshal(v, &b) != nil || !reflect.DeepEqual(a, b) {
			return false
		}
	}
	if m.Contains == "" && m.Regex == "" {
		return true
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return false
	}
	if m.Contains != "" && !strings.Contains(s, m.Contains) {
		return false
	}
	if m.Regex != "" {
		re, err := regexp.Compile(m.Regex)
		if err != nil || !re.MatchString(s) {
			return false
		}
	}
	return true
}

type noTools []string

func (noTools) Name() string { return "no_tools" }

func (n noTools) Score(_ context.Context, _ api.EvalCase, run api.EvalRun) (api.EvalScore, error) {
	var called []string
	for _, c := range run.Tools {
		if (slices.Contains(n, "*") || slices.Contains(n, c.Name)) && !slices.Contains(called, c.Name) {
			called = append(called, c.Name)
		}
	}
	return Verdict("no_tools", len(called) == 0, ifElse(len(called) == 0, "called no forbidden tool",
		"called "+strings.Join(called, ", "))), nil
}

// thresholds checks cost, tokens and duration.
type thresholds api.EvalExpect

func (thresholds) Name() string { return "limits" }

func (t thresholds) Score(_ context.Context, _ api.EvalCase, run api.EvalRun) (api.EvalScore, error) {
	var over []string
	if t.MaxCost > 0 {
		cur := t.MaxCostCurrency
		if cur == "" {
			cur = "USD"
		}
		limit, _ := keel.NanosOf(t.MaxCost)
		if got := run.Usage.Cost.In(cur); got > limit {
			over = append(over, fmt.Sprintf("cost %s %s > %s", keel.FormatNanos(got), cur, keel.FormatNanos(limit)))
		}
		if run.Usage.Unpriced > 0 {
			over = append(over, fmt.Sprintf("%d requests without a price", run.Usage.Unpriced))
		}
	}
	if tokens := run.Usage.InputTokens + run.Usage.OutputTokens; t.MaxTokens > 0 && tokens > t.MaxTokens {
		over = append(over, fmt.Sprintf("tokens %d > %d", tokens, t.MaxTokens))
	}
	if t.MaxDuration > 0 && run.Duration > t.MaxDuration {
		over = append(over, fmt.Sprintf("duration %s > %s", run.Duration.Std().Round(time.Millisecond), t.MaxDuration.Std()))
	}
	return Verdict("limits", len(over) == 0, ifElse(len(over) == 0, "within its limits", strings.Join(over, "; "))), nil
}

func ifElse(c bool, a, b string) string {
	if c {
		return a
	}
	return b
}

// clip cuts s to n bytes at a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
