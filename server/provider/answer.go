package provider

import (
	"bytes"
	"encoding/json"
)

// AnswerTool is the name of the tool through which a backend without a
// structured-output mode (Anthropic) is made to give a run's final answer:
// its input is the answer. keel reserves the name.
const AnswerTool = "keel_answer"

// AnswerToolDescription describes AnswerTool to the model.
const AnswerToolDescription = "Give your final answer. Call this tool exactly once, when you are done, " +
	"with the answer as its input; do not call it together with other tools."

// AnswerSchema returns schema when a backend can ask for it natively: a
// JSON Schema object whose root "type" is "object", which is what
// structured-output modes and tool inputs accept. Otherwise it returns nil,
// and the backend asks in words (AnswerInstruction).
func AnswerSchema(schema json.RawMessage) json.RawMessage {
	var root struct {
		Type json.RawMessage `json:"type"`
	}
	if len(schema) == 0 || json.Unmarshal(schema, &root) != nil || !bytes.Equal(bytes.TrimSpace(root.Type), []byte(`"object"`)) {
		return nil
	}
	return schema
}

// AnswerInstruction is what a backend adds to the system prompt when it
// cannot ask for a schema natively.
func AnswerInstruction(schema json.RawMessage) string {
	return "When you give your final answer, answer with JSON only, matching this JSON Schema:\n" + string(schema)
}

// WithInstruction returns system with the answer instruction for schema
// appended, or system itself when schema is empty.
func WithInstruction(system string, schema json.RawMessage) string {
	if len(schema) == 0 {
		return system
	}
	if system == "" {
		return AnswerInstruction(schema)
	}
	return system + "\n\n" + AnswerInstruction(schema)
}
