package workflows

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/tool"
)

// A run whose configuration sets an output schema must end with an answer
// that matches it (docs/contract.md §21.1). The model is asked for it
// natively where its provider can be (the ModelTurn activity passes the
// schema on); the run checks the final text here, in workflow code, so the
// check is the run's own and replays as it ran (tool.ValidateJSON does no
// I/O, reports its problems in a fixed order, and bounds its work: an
// answer whose check could cost more than tool.MaxValidationWork is
// refused unchecked). An answer that does not match is a malformed
// response of the turn: it shares the turn's budget of requests and of
// malformed responses (§4.2), and its retry is preceded by
// provider.stream_reset.

// maxAnswerProblem bounds what a malformed answer's detail says of its
// problems.
const maxAnswerProblem = 1 << 10

// checkAnswer looks at a successful turn of a run with an output schema.
// A response that calls tools is not a final answer and passes. It returns
// the answer as compact JSON, or the failure that makes the response a
// malformed one (its usage billed all the same), or the error that ends
// the run (a schema that does not compile, which the send's validator
// refuses before it reaches a run).
func checkAnswer(schema json.RawMessage, res *activities.ModelTurnResult) (json.RawMessage, *activities.TurnFailure, *keel.Error) {
	if len(schema) == 0 || len(res.Response.ToolCalls) > 0 {
		return nil, nil, nil
	}
	text := answerText(res.Response.Text)
	if err := tool.ValidateJSON(schema, json.RawMessage(text)); err != nil {
		var bad *tool.InvalidValueError
		if !errors.As(err, &bad) {
			return nil, nil, keel.Errorf(keel.CodeInvalidInput, "output_schema: %v", err)
		}
		problem := "the answer does not match the output schema: " + strings.Join(bad.Problems, "; ")
		return nil, &activities.TurnFailure{Malformed: clip(problem, maxAnswerProblem), Usage: res.Response.Usage}, nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(text)); err != nil {
		// ValidateJSON accepted it as JSON; Compact cannot disagree.
		return nil, nil, internalError("answer: %v", err)
	}
	return buf.Bytes(), nil, nil
}

// answerText is the JSON of a final text: the text without surrounding
// space, or without the Markdown code fence a model may put around it.
func answerText(text string) string {
	t := strings.TrimSpace(text)
	if !strings.HasPrefix(t, "```") || !strings.HasSuffix(t, "```") || len(t) < 6 {
		return t
	}
	inner := t[3 : len(t)-3]
	// The fence's first line may name a language ("```json").
	if nl := strings.IndexByte(inner, '\n'); nl >= 0 && !strings.ContainsAny(inner[:nl], "{[\"") {
		inner = inner[nl+1:]
	}
	return strings.TrimSpace(inner)
}

// CheckOutputSchema refuses, in a send's validator and in the worker's
// check of a schedule, an output schema that
// does not compile or whose checks cannot be bounded (tool.CheckSchema's
// limits, docs/contract.md §21.1): api.CheckOutputSchema has bounded its
// size and nesting, and the compiler loads no reference
// (tool.ValidateJSON), so a remote "$ref" is refused here, never fetched.
func CheckOutputSchema(schema json.RawMessage) *keel.Error {
	if len(schema) == 0 {
		return nil
	}
	if err := tool.CheckSchema(schema); err != nil {
		return keel.Errorf(keel.CodeInvalidInput, "output_schema: %s", clip(err.Error(), 300))
	}
	return nil
}
