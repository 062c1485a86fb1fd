package api_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
)

// docs/contract.md §21.1: an output schema is bounded before anything
// compiles it.
func TestCheckOutputSchema(t *testing.T) {
	nest := func(n int) string {
		return strings.Repeat(`{"items":`, n-1) + `{}` + strings.Repeat(`}`, n-1)
	}
	cases := []struct {
		name   string
		schema string
		code   keel.Code // empty: accepted
	}{
		{"none", ``, ""},
		{"object", `{"type":"object"}`, ""},
		{"at-depth-limit", nest(api.MaxOutputSchemaDepth), ""},
		{"past-depth-limit", nest(api.MaxOutputSchemaDepth + 1), keel.CodeInvalidInput},
		{"array", `[]`, keel.CodeInvalidInput},
		{"boolean", ` true`, keel.CodeInvalidInput},
		{"two-values", `{} {}`, keel.CodeInvalidInput},
		{"not-json", `{"type":`, keel.CodeInvalidInput},
		{"at-size-limit", `{"description":"` + strings.Repeat("x", api.MaxOutputSchemaBytes-18) + `"}`, ""},
		{"past-size-limit", `{"description":"` + strings.Repeat("x", api.MaxOutputSchemaBytes) + `"}`, keel.CodeTooLarge},
	}
	for _, c := range cases {
		err := api.CheckOutputSchema(json.RawMessage(c.schema))
		if c.code == "" {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		var ke *keel.Error
		if !errors.As(err, &ke) || ke.Code != c.code {
			t.Errorf("%s: got %v, want %s", c.name, err, c.code)
			continue
		}
		if len(ke.Message) > 200 {
			t.Errorf("%s: the message repeats the schema: %d bytes", c.name, len(ke.Message))
		}
	}
}

// The run config merges and validates its schema like its other fields.
func TestRunConfigOutputSchema(t *testing.T) {
	base := api.RunConfig{OutputSchema: json.RawMessage(`{"type":"object"}`)}
	if got := base.Merge(&api.RunConfig{Model: "m"}); string(got.OutputSchema) != `{"type":"object"}` {
		t.Errorf("a send without a schema keeps the default's: %s", got.OutputSchema)
	}
	if got := base.Merge(&api.RunConfig{OutputSchema: json.RawMessage(`{"type":"object","required":["a"]}`)}); !strings.Contains(string(got.OutputSchema), "required") {
		t.Errorf("a send's schema replaces the default's: %s", got.OutputSchema)
	}
	if err := (api.RunConfig{OutputSchema: json.RawMessage(`[]`)}).Validate(); !errors.Is(err, keel.ErrInvalidInput) {
		t.Errorf("Validate: %v", err)
	}
}
