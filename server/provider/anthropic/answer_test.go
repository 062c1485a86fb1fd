package anthropic

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/provider"
	"github.com/keelrun/keel/server/provider/providertest"
)

var factsSchema = json.RawMessage(`{"type":"object","required":["facts"],"properties":{"facts":{"type":"array"}}}`)

// docs/contract.md §21.1: the Messages API gets an object schema as the
// input of the answer tool, which the model must call (tool_choice tool
// without tools of its own, any with them); the call's input comes back
// as the answer, never as a tool call, and ends the turn.
func TestOutputSchemaThroughAForcedTool(t *testing.T) {
	srv := providertest.NewServer(t, providertest.SSE(t, "testdata/answer_tool.sse"), providertest.SSE(t, "testdata/answer_tool.sse"))
	req := subject.Request
	req.OutputSchema = factsSchema
	chunks, err := providertest.Collect(t, subject.Provider(t, srv.URL).Stream(context.Background(), req))
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Tools []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
		ToolChoice map[string]any `json:"tool_choice"`
	}
	if err := json.Unmarshal(srv.Last().Body, &body); err != nil {
		t.Fatal(err)
	}
	if len(body.Tools) != 1 || body.Tools[0].Name != provider.AnswerTool {
		t.Fatalf("tools = %+v, want the answer tool alone", body.Tools)
	}
	if diff := cmp.Diff(jsonValue(t, factsSchema), jsonValue(t, body.Tools[0].InputSchema)); diff != "" {
		t.Errorf("input_schema (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"type": "tool", "name": provider.AnswerTool}, body.ToolChoice); diff != "" {
		t.Errorf("tool_choice (-want +got):\n%s", diff)
	}
	wantChunks := []provider.Chunk{
		providertest.UsageChunk(keel.Usage{InputTokens: 120, OutputTokens: 1}),
		{Text: "Here it is."}, {Answer: `{"facts": ["a`}, {Answer: `"]}`}, {Finish: provider.FinishStop},
		providertest.UsageChunk(keel.Usage{InputTokens: 120, OutputTokens: 20}),
	}
	if diff := cmp.Diff(wantChunks, chunks); diff != "" {
		t.Errorf("chunks (-want +got):\n%s", diff)
	}
	resp, err := providertest.Assemble(chunks).Response()
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != `{"facts": ["a"]}` || len(resp.ToolCalls) != 0 || resp.Finish != provider.FinishStop {
		t.Errorf("response = %+v: the answer is the text, not a tool call", resp)
	}

	// With tools of its own the model may call them or answer.
	withTools := weatherTranscript()
	withTools.OutputSchema = factsSchema
	if _, err := providertest.Collect(t, subject.Provider(t, srv.URL).Stream(context.Background(), withTools)); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(srv.Last().Body, &body); err != nil {
		t.Fatal(err)
	}
	if n := len(body.Tools); n != 3 || body.Tools[n-1].Name != provider.AnswerTool {
		t.Errorf("tools = %+v, want the run's and the answer tool last", body.Tools)
	}
	if body.ToolChoice["type"] != "any" {
		t.Errorf("tool_choice = %v, want any", body.ToolChoice)
	}
}

// A schema whose root is not an object cannot be a tool's input: it is
// asked for in the system prompt, and no answer tool is offered.
func TestOutputSchemaNotAnObjectGoesInTheSystemPrompt(t *testing.T) {
	srv := providertest.NewServer(t, providertest.SSE(t, "testdata/text.sse"))
	req := subject.Request
	req.OutputSchema = json.RawMessage(`{"type":"array"}`)
	if _, err := providertest.Collect(t, subject.Provider(t, srv.URL).Stream(context.Background(), req)); err != nil {
		t.Fatal(err)
	}
	raw := string(srv.Last().Body)
	if strings.Contains(raw, provider.AnswerTool) || strings.Contains(raw, "tool_choice") {
		t.Errorf("no answer tool for a non-object schema: %s", raw)
	}
	if !strings.Contains(raw, "matching this JSON Schema") {
		t.Errorf("the schema is asked for in the system prompt: %s", raw)
	}
}
