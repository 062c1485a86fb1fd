package keel_test

import (
	"encoding/json"
	"testing"

	"github.com/keelrun/keel"
)

func TestEstimateTokensGrowsWithContent(t *testing.T) {
	small := keel.EstimateTokens("", []keel.Message{keel.UserMessage("hi")})
	big := keel.EstimateTokens("be brief", []keel.Message{keel.UserMessage("hi"),
		{Role: keel.RoleAssistant, Content: "a much longer answer than the question",
			ToolCalls: []keel.ToolCall{{ID: "c", Name: "read_file", Arguments: json.RawMessage(`{"path":"README.md"}`)}}}})
	if small <= 0 || big <= small {
		t.Errorf("estimates %d then %d", small, big)
	}
}

// Tool specs are measured like messages: four bytes a token plus framing.
func TestEstimateToolTokens(t *testing.T) {
	spec := keel.ToolSpec{Name: "read_file", Description: "Read a file.", Parameters: json.RawMessage(`{"type":"object"}`)}
	one := keel.EstimateToolTokens([]keel.ToolSpec{spec})
	if want := 8 + (len("read_file")+len("Read a file.")+len(`{"type":"object"}`)+3)/4; one != want {
		t.Errorf("one spec: %d tokens, want %d", one, want)
	}
	if two := keel.EstimateToolTokens([]keel.ToolSpec{spec, spec}); two != 2*one {
		t.Errorf("two specs: %d tokens, want %d", two, 2*one)
	}
	if none := keel.EstimateToolTokens(nil); none != 0 {
		t.Errorf("no specs: %d tokens", none)
	}
}
