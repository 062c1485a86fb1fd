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
		SessionBudget: &api.Budget{MaxTokens: 20}, OutputSchema: json.RawMessage(`{"type":"object"}`),
		Reasoning: &keel.Reasoning{Effort: keel.ReasoningLow}, Hooks: []string{"guard", "audit"}}
	if got := gateway.ScheduleConfigRoundTrip(c); !reflect.DeepEqual(got, c) {
		t.Fatalf("got %+v, want %+v", got, c)
	}
	a := &gateway.ScheduleConfig{Agent: "researcher", Hooks: []string{"guard"}}
	if got := gateway.ScheduleConfigRoundTrip(a); !reflect.DeepEqual(got, a) {
		t.Fatalf("got %+v, want %+v", got, a)
	}
}

// A run's hooks (docs/contract.md §23) go with its config, beside an
// agent too; a name that cannot be a hook's, one named twice, or more
// than api.MaxRunHooks are refused before any call, typed
// keel.InvalidInput, naming the field and clipped.
func TestRunRequestHooks(t *testing.T) {
	many := make([]string, api.MaxRunHooks+1)
	for i := range many {
		many[i] = "h" + strings.Repeat("x", i)
	}
	for name, hooks := range map[string][]string{
		"a path":   {"../hook"},
		"markup":   {"<b>" + strings.Repeat("x", 1<<12)},
		"empty":    {""},
		"twice":    {"guard", "audit", "guard"},
		"too many": many,
	} {
		_, err := gateway.RunRequest{Prompt: "hi", Hooks: hooks}.Validate()
		if !errors.Is(err, keel.ErrInvalidInput) || !strings.Contains(err.Error(), "hooks") || len(err.Error()) > 200 ||
			strings.Contains(err.Error(), "<b>") {
			t.Errorf("%s: %v", name, err)
		}
	}
	for name, req := range map[string]gateway.RunRequest{
		"alone":             {Prompt: "hi", Hooks: []string{"guard", "audit"}},
		"with an agent":     {Prompt: "hi", Agent: "planner", Hooks: []string{"guard"}},
		"as a new default":  {Prompt: "hi", Hooks: []string{"guard"}, SetDefault: true},
		"the most it takes": {Prompt: "hi", Hooks: many[:api.MaxRunHooks]},
	} {
		opts, err := req.Validate()
		want := 1
		if req.SetDefault {
			want = 2
		}
		if err != nil || len(opts) != want {
			t.Errorf("%s: %d options, %v; want %d", name, len(opts), err, want)
		}
	}
}
