package gateway_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/server/gateway"
)

// docs/contract.md §21.1: a run's output_schema is bounded before any
// call; null is no schema, and a good one makes the send carry a config.
func TestRunRequestOutputSchema(t *testing.T) {
	for name, c := range map[string]struct {
		schema string
		want   error
	}{
		"array":  {`[]`, keel.ErrInvalidInput},
		"string": {`"x"`, keel.ErrInvalidInput},
		"huge":   {`{"description":"` + strings.Repeat("<b>", api.MaxOutputSchemaBytes) + `"}`, keel.ErrTooLarge},
		"deep":   {strings.Repeat(`{"a":`, 40) + "1" + strings.Repeat("}", 40), keel.ErrInvalidInput},
		"null":   {`null`, nil},
		"object": {`{"type":"object"}`, nil},
	} {
		opts, err := (gateway.RunRequest{Prompt: "hi", OutputSchema: json.RawMessage(c.schema)}).Validate()
		if c.want == nil {
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			if name == "object" && len(opts) != 1 {
				t.Errorf("%s: %d send options, want the run config", name, len(opts))
			}
			if name == "null" && len(opts) != 0 {
				t.Errorf("%s: null is no schema, got %d options", name, len(opts))
			}
			continue
		}
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "output_schema") || strings.Contains(msg, "<b>") || len(msg) > 200 {
			t.Errorf("%s: the error %q does not name the field, or echoes what was sent", name, msg)
		}
	}
}
