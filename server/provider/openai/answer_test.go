package openai

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/keelrun/keel/server/provider/providertest"
)

// docs/contract.md §21.1: an object schema goes as structured outputs
// (response_format json_schema, not strict); any other schema is asked for
// in the system prompt.
func TestOutputSchemaRequest(t *testing.T) {
	object := json.RawMessage(`{"type":"object","required":["facts"],"properties":{"facts":{"type":"array"}}}`)
	srv := providertest.NewServer(t, providertest.SSE(t, "testdata/text.sse"), providertest.SSE(t, "testdata/text.sse"))
	req := subject.Request
	req.OutputSchema = object
	if _, err := providertest.Collect(t, subject.Provider(t, srv.URL).Stream(context.Background(), req)); err != nil {
		t.Fatal(err)
	}
	var body struct {
		ResponseFormat struct {
			Type       string `json:"type"`
			JSONSchema struct {
				Name   string          `json:"name"`
				Strict bool            `json:"strict"`
				Schema json.RawMessage `json:"schema"`
			} `json:"json_schema"`
		} `json:"response_format"`
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(srv.Last().Body, &body); err != nil {
		t.Fatal(err)
	}
	rf := body.ResponseFormat
	if rf.Type != "json_schema" || rf.JSONSchema.Name != "answer" || rf.JSONSchema.Strict {
		t.Errorf("response_format = %+v", rf)
	}
	var sent, want any
	_ = json.Unmarshal(rf.JSONSchema.Schema, &sent)
	_ = json.Unmarshal(object, &want)
	if !jsonEqual(sent, want) {
		t.Errorf("schema sent %s, want %s", rf.JSONSchema.Schema, object)
	}
	if body.Messages[0].Role == "system" {
		t.Errorf("a native schema adds no system prompt: %v", body.Messages[0])
	}

	req.OutputSchema = json.RawMessage(`{"type":"array","items":{"type":"string"}}`)
	if _, err := providertest.Collect(t, subject.Provider(t, srv.URL).Stream(context.Background(), req)); err != nil {
		t.Fatal(err)
	}
	raw := string(srv.Last().Body)
	if strings.Contains(raw, "response_format") {
		t.Errorf("a non-object schema is not sent as response_format: %s", raw)
	}
	if !strings.Contains(raw, `"role":"system"`) || !strings.Contains(raw, "matching this JSON Schema") {
		t.Errorf("a non-object schema is asked for in the system prompt: %s", raw)
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
