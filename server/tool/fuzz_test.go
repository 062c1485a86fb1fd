package tool

import (
	"encoding/json"
	"runtime"
	"testing"
	"time"
)

// Bounds on one ValidateJSON, asserted by FuzzValidateJSON. The budget
// (MaxValidationWork) is at most about 100 ms of the validator's work;
// these leave room for the race detector and a busy machine, and are still
// far below what an unbounded check costs (42 s and 536 MB for the
// expanding schema of TestExpandingSchemaIsRefused at depth 18).
const (
	fuzzMaxDuration = 2 * time.Second
	fuzzMaxAlloc    = 256 << 20
)

// FuzzValidateJSON checks a schema and a value as they come: whatever a
// caller, a model or an MCP server sends, CheckSchema and ValidateJSON
// finish within the bounds above, and a schema CheckSchema accepts never
// makes ValidateJSON report it invalid. Its seeds (testdata/fuzz) hold the
// costly shapes known: the expanding schema, nesting that multiplies, huge
// numbers, patterns and regular expressions, uniqueItems, unevaluated
// properties, dynamic references, a deeply nested invalid schema.
func FuzzValidateJSON(f *testing.F) {
	f.Add(personSchema, `{"name":"Ada","age":36,"tags":["x"],"address":{"city":"London"}}`)
	f.Fuzz(func(t *testing.T, schema, value string) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		checkErr := CheckSchema(json.RawMessage(schema))
		err := ValidateJSON(json.RawMessage(schema), json.RawMessage(value))
		took := time.Since(start)
		runtime.ReadMemStats(&after)
		if took > fuzzMaxDuration {
			t.Errorf("took %v, want at most %v", took, fuzzMaxDuration)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > fuzzMaxAlloc {
			t.Errorf("allocated %d MiB, want at most %d", alloc>>20, fuzzMaxAlloc>>20)
		}
		if checkErr == nil && err != nil {
			if _, ok := err.(*InvalidValueError); !ok {
				t.Errorf("CheckSchema accepted the schema, ValidateJSON: %v", err)
			}
		}
	})
}
