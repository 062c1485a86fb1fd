package tool

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestAskUserQuestion(t *testing.T) {
	tests := []struct {
		args    string
		want    Question
		wantErr string
	}{
		{`{"question":"Deploy now?"}`, Question{ID: AskUserQuestionID, Prompt: "Deploy now?"}, ""},
		{`{"question":"Deploy now?","schema":null}`, Question{ID: AskUserQuestionID, Prompt: "Deploy now?"}, ""},
		{`{"question":"Deploy now?","schema":{"type":"boolean"}}`,
			Question{ID: AskUserQuestionID, Prompt: "Deploy now?", Schema: json.RawMessage(`{"type":"boolean"}`)}, ""},
		{`{"question":"  "}`, Question{}, `invalid arguments for tool "ask_user": "question" must be a non-empty string`},
		{`{}`, Question{}, `invalid arguments for tool "ask_user": "question" must be a non-empty string`},
		{`{"question":"Pick","schema":"boolean"}`, Question{}, `invalid arguments for tool "ask_user": "schema" must be a JSON Schema object`},
		{`{"question":"Pick","schema":{"type":"colour"}}`, Question{},
			`invalid arguments for tool "ask_user": "schema" is not usable: tool: invalid JSON Schema: ` +
				`at /type: got string, want array; at /type: value must be one of 'array', 'boolean', 'integer', 'null', 'number', 'object', 'string'`},
		{`{"question":"Pick","schema":{"$ref":"https://example.com/s.json"}}`, Question{},
			`invalid arguments for tool "ask_user": "schema" is not usable: tool: invalid JSON Schema: ` +
				`failing loading "https://example.com/s.json": only self-contained schemas are supported`},
		{`{"question":"Pick","schema":` + string(expandingSchema(20)) + `}`, Question{},
			`invalid arguments for tool "ask_user": "schema" is not usable: tool: invalid JSON Schema: too costly to evaluate: ` +
				`the schema evaluates more than 1000 subschemas at one place of a value (tool.MaxInPlaceSubschemas)`},
		{`{"question":"Pick","schema":` + strings.Repeat(`{"items":`, 1000) + `{"type":1}` + strings.Repeat(`}`, 1000) + `}`, Question{},
			`invalid arguments for tool "ask_user": "schema" is not usable: tool: invalid JSON Schema: too costly to evaluate: ` +
				`it nests deeper than 64 levels (tool.MaxSchemaDepth)`},
		{`{"question":"Pick","choices":["a"]}`, Question{},
			`invalid arguments for tool "ask_user": want {"question": string, "schema": optional object}: json: unknown field "choices"`},
	}
	for _, tt := range tests {
		t.Run(tt.args, func(t *testing.T) {
			got, err := AskUserQuestion(json.RawMessage(tt.args))
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if diff := cmp.Diff(tt.wantErr, gotErr); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("question (-want +got):\n%s", diff)
			}
		})
	}
}

// Outside a workflow, ask_user goes through Ask: the first run asks, and a
// run with the answer in its context returns it.
func TestAskUserCallRoundTrip(t *testing.T) {
	args := json.RawMessage(`{"question":"Which region?","schema":{"type":"string","enum":["eu","us"]}}`)
	info := CallInfo{SessionID: "s", RunID: "s/run-1", ToolCallID: "call-1"}

	_, err := AskUser().Call(WithCall(context.Background(), info, nil, nil), args)
	var need *NeedInput
	if !errors.As(err, &need) {
		t.Fatalf("first run: error %v, want *NeedInput", err)
	}
	wantQ := Question{ID: AskUserQuestionID, Prompt: "Which region?", Schema: json.RawMessage(`{"type":"string","enum":["eu","us"]}`)}
	if diff := cmp.Diff(wantQ, need.Question); diff != "" {
		t.Errorf("question (-want +got):\n%s", diff)
	}

	answers := map[string]json.RawMessage{need.Question.ID: json.RawMessage(`"eu"`)}
	got, err := AskUser().Call(WithCall(context.Background(), info, answers, nil), args)
	if err != nil {
		t.Fatalf("second run: %v", err)
	}
	if diff := cmp.Diff(Result{Output: "eu"}, got); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
}

func TestAskUserCallBadArguments(t *testing.T) {
	got, err := AskUser().Call(context.Background(), json.RawMessage(`{"question":""}`))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(fail(`invalid arguments for tool "ask_user": "question" must be a non-empty string`), got); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
}

func TestAnswerText(t *testing.T) {
	tests := []struct{ answer, want string }{
		{`"yes"`, "yes"},
		{`"line1\nline2"`, "line1\nline2"},
		{`true`, "true"},
		{`{ "a" : [1, 2] }`, `{"a":[1,2]}`},
		{`not json`, "not json"},
	}
	for _, tt := range tests {
		if got := AnswerText(json.RawMessage(tt.answer)); got != tt.want {
			t.Errorf("AnswerText(%s) = %q, want %q", tt.answer, got, tt.want)
		}
	}
}
