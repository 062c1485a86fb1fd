package tool

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A tool that asks two questions before its side effect, run the way the
// runner does: from the start, with the answers so far, until it finishes.
func TestAskReRunModel(t *testing.T) {
	var effects []string
	deploy := New("deploy", "", func(ctx context.Context, _ struct{}) (string, error) {
		region, err := Ask(ctx, Question{ID: "region", Prompt: "Which region?"})
		if err != nil {
			return "", err
		}
		ok, err := Ask(ctx, Question{ID: "confirm", Prompt: "Deploy to " + AnswerText(region) + "?",
			Schema: json.RawMessage(`{"type":"boolean"}`)})
		if err != nil {
			return "", err
		}
		if string(ok) != "true" {
			return "cancelled by the user", nil
		}
		effects = append(effects, "deploy "+AnswerText(region)+" key="+Info(ctx).IdempotencyKey)
		return "deployed", nil
	})

	info := CallInfo{SessionID: "s", RunID: "s/run-1", ToolCallID: "c1", IdempotencyKey: "s/run-1/c1"}
	host := map[string]json.RawMessage{"region": json.RawMessage(`"eu"`), "confirm": json.RawMessage(`true`)}
	answers := map[string]json.RawMessage{}
	var asked []Question
	var got Result
	for range 5 {
		res, err := deploy.Call(WithCall(context.Background(), info, answers, nil), json.RawMessage(`{}`))
		var need *NeedInput
		if errors.As(err, &need) {
			asked = append(asked, need.Question)
			if err := ValidateJSON(need.Question.Schema, host[need.Question.ID]); err != nil {
				t.Fatalf("host answer rejected: %v", err)
			}
			answers[need.Question.ID] = host[need.Question.ID]
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		got = res
		break
	}
	wantAsked := []Question{
		{ID: "region", Prompt: "Which region?"},
		{ID: "confirm", Prompt: "Deploy to eu?", Schema: json.RawMessage(`{"type":"boolean"}`)},
	}
	if diff := cmp.Diff(wantAsked, asked); diff != "" {
		t.Errorf("questions (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Result{Output: "deployed"}, got); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"deploy eu key=s/run-1/c1"}, effects); diff != "" {
		t.Errorf("side effects (-want +got):\n%s", diff)
	}
}

func TestCallContext(t *testing.T) {
	var notes []string
	info := CallInfo{SessionID: "s", RunID: "r", ToolCallID: "c", IdempotencyKey: "k", Attempt: 2}
	ctx := WithCall(context.Background(), info, nil, func(m string) { notes = append(notes, m) })
	Progress(ctx, "50%")
	Progress(context.Background(), "dropped: no call in context")
	if diff := cmp.Diff([]string{"50%"}, notes); diff != "" {
		t.Errorf("progress (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(info, Info(ctx)); diff != "" {
		t.Errorf("Info (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(CallInfo{}, Info(context.Background())); diff != "" {
		t.Errorf("Info without a call (-want +got):\n%s", diff)
	}
	_, err := Ask(context.Background(), Question{ID: "q", Prompt: "?"})
	var need *NeedInput
	if !errors.As(err, &need) || need.Question.ID != "q" {
		t.Errorf("Ask without a call: %v, want *NeedInput", err)
	}
}
