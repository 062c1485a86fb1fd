package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/provider"
	"github.com/keelrun/keel/server/provider/providertest"
)

// A tool loop with thinking on: the second request carries the first
// turn's thinking (with its signature) and its redacted thinking back,
// first and unchanged, before the tool call; reasoning another backend
// wrote is never sent.
func TestThinkingGoesBackInTheToolLoop(t *testing.T) {
	srv := providertest.NewServer(t, providertest.SSE(t, "testdata/thinking_tool_use.sse"), providertest.SSE(t, "testdata/text.sse"))
	p, err := New(Config{BaseURL: srv.URL, APIKey: testKey, Reasoning: keel.Reasoning{Effort: keel.ReasoningLow}})
	if err != nil {
		t.Fatal(err)
	}
	req := provider.Request{Model: "claude-sonnet-4-5", Messages: []keel.Message{keel.UserMessage("Weather in Paris?")},
		Tools: []keel.ToolSpec{{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object"}`)}}}
	chunks, err := providertest.Collect(t, p.Stream(context.Background(), req))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := providertest.Assemble(chunks).Response()
	if err != nil {
		t.Fatal(err)
	}
	want := []keel.ReasoningPart{
		{Provider: Name, Text: "The user wants Paris weather; call get_weather.", Signature: "EqMCCkYIBxgCKkDk3v9Qx7bTsMZl0wq2rN8c4kE1GgwKc"},
		{Provider: Name, Redacted: true, Signature: "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5"},
	}
	if diff := cmp.Diff(want, resp.Reasoning); diff != "" {
		t.Fatalf("reasoning kept (-want +got):\n%s", diff)
	}
	if resp.Text != "" || len(resp.ToolCalls) != 1 {
		t.Fatalf("response text %q, calls %v: the thinking must not become text", resp.Text, resp.ToolCalls)
	}

	turn := resp.Message()
	turn.Reasoning = append(turn.Reasoning, keel.ReasoningPart{Provider: "openai", ID: "rs_1", Signature: "gAAAA-not-for-anthropic"})
	req.Messages = append(req.Messages, turn, keel.ToolResultMessage(resp.ToolCalls[0], keel.ToolOK, "18C sunny"))
	if _, err := providertest.Collect(t, p.Stream(context.Background(), req)); err != nil {
		t.Fatal(err)
	}
	var body struct {
		MaxTokens int `json:"max_tokens"`
		Thinking  struct {
			Type   string `json:"type"`
			Budget int    `json:"budget_tokens"`
		} `json:"thinking"`
		Messages []struct {
			Role    string           `json:"role"`
			Content []map[string]any `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(srv.Last().Body, &body); err != nil {
		t.Fatal(err)
	}
	if body.Thinking.Type != "enabled" || body.Thinking.Budget != 4096 || body.MaxTokens != DefaultMaxTokens+4096 {
		t.Errorf("thinking %+v, max_tokens %d: want enabled with 4096 of %d", body.Thinking, body.MaxTokens, DefaultMaxTokens+4096)
	}
	if len(body.Messages) != 3 {
		t.Fatalf("%d messages, want user, assistant, user", len(body.Messages))
	}
	var kinds []string
	for _, b := range body.Messages[1].Content {
		kinds = append(kinds, b["type"].(string))
	}
	if diff := cmp.Diff([]string{"thinking", "redacted_thinking", "tool_use"}, kinds); diff != "" {
		t.Fatalf("assistant blocks (-want +got):\n%s", diff)
	}
	first, second := body.Messages[1].Content[0], body.Messages[1].Content[1]
	if first["thinking"] != want[0].Text || first["signature"] != want[0].Signature || second["data"] != want[1].Signature {
		t.Errorf("thinking blocks changed on the way back: %v, %v", first, second)
	}

	// A request that does not think (a compaction's) is sent none.
	srv2 := providertest.NewServer(t, providertest.SSE(t, "testdata/text.sse"))
	plain := subject.Provider(t, srv2.URL)
	if _, err := providertest.Collect(t, plain.Stream(context.Background(), req)); err != nil {
		t.Fatal(err)
	}
	if b := srv2.Last().Body; strings.Contains(string(b), "thinking") {
		t.Errorf("a request without thinking carries thinking: %s", b)
	}
}

func TestReasoningSettings(t *testing.T) {
	p, err := New(Config{APIKey: testKey})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		model string
		r     keel.Reasoning
		ok    bool
	}{
		{"claude-sonnet-4-5", keel.Reasoning{Effort: keel.ReasoningHigh}, true},
		{"claude-opus-4-1", keel.Reasoning{BudgetTokens: 2000}, true},
		{"claude-3-5-haiku-latest", keel.Reasoning{Effort: keel.ReasoningLow}, false},
		{"claude-sonnet-4-5", keel.Reasoning{BudgetTokens: 10}, false},
		{"claude-sonnet-4-5", keel.Reasoning{Effort: "max"}, false},
	} {
		err := provider.CheckReasoning(p, tt.model, tt.r)
		var ke *keel.Error
		if tt.ok != (err == nil) || (err != nil && (!errors.As(err, &ke) || ke.Code != keel.CodeInvalidInput)) {
			t.Errorf("%s %+v: %v", tt.model, tt.r, err)
		}
	}
	// A request the check would refuse is refused before sending too.
	srv := providertest.NewServer(t, providertest.SSE(t, "testdata/text.sse"))
	_, err = providertest.Collect(t, subject.Provider(t, srv.URL).Stream(context.Background(), provider.Request{
		Model: "claude-3-5-haiku-latest", Messages: subject.Request.Messages, Reasoning: keel.Reasoning{Effort: keel.ReasoningLow}}))
	var pe *keel.ProviderError
	if !errors.As(err, &pe) || pe.Kind != keel.ProviderInvalidRequest || srv.Count() != 0 {
		t.Errorf("error %v after %d requests, want invalid_request before any", err, srv.Count())
	}
}

// With thinking on the answer tool cannot be forced: the schema is asked
// for in the system prompt, and the model chooses its tools.
func TestThinkingAsksForTheAnswerInTheInstructions(t *testing.T) {
	srv := providertest.NewServer(t, providertest.SSE(t, "testdata/text.sse"))
	req := subject.Request
	req.OutputSchema = json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)
	req.Reasoning = keel.Reasoning{BudgetTokens: 2048}
	if _, err := providertest.Collect(t, subject.Provider(t, srv.URL).Stream(context.Background(), req)); err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal(srv.Last().Body, &body); err != nil {
		t.Fatal(err)
	}
	if body["tool_choice"] != nil || body["tools"] != nil || body["system"] == nil {
		t.Errorf("tool_choice %v, tools %v, system %v: want the schema in the system prompt only", body["tool_choice"], body["tools"], body["system"])
	}
}

// A hosted web search is one HostedToolActivity with its query and result
// URLs, counted in the usage, and never a tool call of the run.
func TestHostedWebSearch(t *testing.T) {
	if _, err := New(Config{APIKey: testKey, HostedTools: []string{"browser"}}); !errors.Is(err, ErrHostedTool) {
		t.Errorf("unknown hosted tool: %v", err)
	}
	srv := providertest.NewServer(t, providertest.SSE(t, "testdata/web_search.sse"))
	p, err := New(Config{BaseURL: srv.URL, APIKey: testKey, HostedTools: []string{HostedWebSearch}})
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := providertest.Collect(t, p.Stream(context.Background(), subject.Request))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := providertest.Assemble(chunks).Response()
	if err != nil {
		t.Fatal(err)
	}
	want := []keel.HostedToolActivity{{Name: "web_search", ID: "srvtoolu_01W", Query: "temporal workflow continue-as-new",
		Detail: "2 results", URLs: []string{"https://docs.temporal.io/workflow-execution/continue-as-new",
			"https://docs.temporal.io/workflow-execution/limits"}}}
	if diff := cmp.Diff(want, resp.Hosted); diff != "" {
		t.Errorf("hosted uses (-want +got):\n%s", diff)
	}
	if resp.Usage.WebSearches != 1 || len(resp.ToolCalls) != 0 || resp.Finish != provider.FinishStop {
		t.Errorf("usage %+v, calls %v, finish %s", resp.Usage, resp.ToolCalls, resp.Finish)
	}
	if resp.Text != "Let me look that up. A workflow continues as new to start a fresh history." {
		t.Errorf("text %q", resp.Text)
	}
	var body struct {
		Tools []map[string]any `json:"tools"`
	}
	if err := json.Unmarshal(srv.Last().Body, &body); err != nil {
		t.Fatal(err)
	}
	if len(body.Tools) != 1 || body.Tools[0]["type"] != "web_search_20250305" {
		t.Errorf("tools sent %v", body.Tools)
	}
}
