package gateway_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/server/gateway"
)

// A run's max_tokens goes with its config; a negative one is refused.
func TestRunRequestMaxTokens(t *testing.T) {
	if _, err := (gateway.RunRequest{Prompt: "hi", MaxTokens: 500}).Validate(); err != nil {
		t.Fatal(err)
	}
	_, err := (gateway.RunRequest{Prompt: "hi", MaxTokens: -1}).Validate()
	if !errors.Is(err, keel.ErrInvalidInput) || !strings.Contains(err.Error(), "max_tokens") {
		t.Fatalf("%v, want keel.InvalidInput naming max_tokens", err)
	}
	if _, err := (gateway.RunRequest{Prompt: "hi", MaxTokens: 500, SetDefault: true}).Validate(); err != nil {
		t.Fatalf("max_tokens alone with set_default: %v", err)
	}
}

// A schedule's config keeps every field it carries through api.RunConfig
// and back: max_tokens and output_schema too.
func TestScheduleConfigRoundTrip(t *testing.T) {
	c := &gateway.ScheduleConfig{Model: "scripted:demo", Tools: []string{"t"}, System: "s", MaxSteps: 3, MaxTokens: 500,
		Approvals: map[string]api.Approval{"*": api.ApprovalAsk}, Budget: &api.Budget{MaxTokens: 10},
		SessionBudget: &api.Budget{MaxTokens: 20}, OutputSchema: json.RawMessage(`{"type":"object"}`)}
	if got := gateway.ScheduleConfigRoundTrip(c); !reflect.DeepEqual(got, c) {
		t.Fatalf("got %+v, want %+v", got, c)
	}
	a := &gateway.ScheduleConfig{Agent: "researcher"}
	if got := gateway.ScheduleConfigRoundTrip(a); !reflect.DeepEqual(got, a) {
		t.Fatalf("got %+v, want %+v", got, a)
	}
}
