package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/keelrun/keel"
)

// AskUserQuestionID is the Question.ID of the ask_user tool's question.
// Each ask_user call asks exactly one question, so the pair (tool call ID,
// AskUserQuestionID) identifies it.
const AskUserQuestionID = "ask_user"

var askUserSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"question":{"type":"string","minLength":1,"description":"The question for the user."},` +
	`"schema":{"type":"object","description":"Optional JSON Schema the answer must match, for a structured answer ` +
	`(for example {\"type\":\"boolean\"} for yes or no). Without it the answer is free text."}},` +
	`"required":["question"],"additionalProperties":false}`)

// AskUser returns the ask_user tool: it asks the user (the host) a question
// and returns the answer. It is workflow-native (NativeAskUser): the Run
// workflow raises a host-input request from AskUserQuestion and waits for
// the answer durably. Its Call, for use outside a workflow, goes through
// Ask, so a runner that supports host input re-runs it with the answer.
func AskUser() Tool { return askUserTool{} }

type askUserTool struct{}

var _ Native = askUserTool{}

func (askUserTool) Spec() keel.ToolSpec {
	return keel.ToolSpec{
		Name: NativeAskUser,
		Description: "Ask the user a question and wait for the answer. Use it when you need a decision, " +
			"a confirmation or information only the user has. The user may take a long time to answer.",
		Parameters: askUserSchema,
	}
}

func (askUserTool) NativeKind() string { return NativeAskUser }

func (askUserTool) Call(ctx context.Context, args json.RawMessage) (Result, error) {
	q, err := AskUserQuestion(args)
	if err != nil {
		return argumentError(NativeAskUser, err).Result(), nil
	}
	answer, err := Ask(ctx, q)
	if err != nil {
		return Result{}, err
	}
	return Result{Output: AnswerText(answer)}, nil
}

// AskUserQuestion reads the ask_user tool's arguments, {"question": string,
// "schema": optional JSON Schema}, into the question to put to the host.
// It returns an *ArgumentError for an empty question or a schema that does
// not compile, so that a later ValidateJSON of the answer fails only on the
// answer. It is deterministic, for use in workflow code.
func AskUserQuestion(args json.RawMessage) (Question, error) {
	bad := func(format string, a ...any) (Question, error) {
		return Question{}, &ArgumentError{Tool: NativeAskUser, Problems: []string{fmt.Sprintf(format, a...)}}
	}
	var in struct {
		Question *string         `json:"question"`
		Schema   json.RawMessage `json:"schema"`
	}
	dec := json.NewDecoder(bytes.NewReader(normalizeArgs(args)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return bad(`want {"question": string, "schema": optional object}: %v`, err)
	}
	if in.Question == nil || strings.TrimSpace(*in.Question) == "" {
		return bad(`"question" must be a non-empty string`)
	}
	schema := bytes.TrimSpace(in.Schema)
	if bytes.Equal(schema, []byte("null")) {
		schema = nil
	}
	if len(schema) > 0 {
		if schema[0] != '{' {
			return bad(`"schema" must be a JSON Schema object`)
		}
		if err := CheckSchema(schema); err != nil {
			return bad(`"schema" is not usable: %v`, err)
		}
	}
	return Question{ID: AskUserQuestionID, Prompt: *in.Question, Schema: json.RawMessage(schema)}, nil
}

// AnswerText renders a host's answer for the model: a JSON string as its
// text, any other value as compact JSON.
func AnswerText(answer json.RawMessage) string {
	var s string
	if err := json.Unmarshal(answer, &s); err == nil {
		return s
	}
	var b bytes.Buffer
	if err := json.Compact(&b, answer); err != nil {
		return string(answer)
	}
	return b.String()
}
