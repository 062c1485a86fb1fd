package tool

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const personSchema = `{
	"type": "object",
	"properties": {
		"name": {"type": "string", "minLength": 1},
		"age": {"type": "integer", "minimum": 0},
		"tags": {"type": "array", "items": {"type": "string"}},
		"address": {
			"type": "object",
			"properties": {"city": {"type": "string"}},
			"required": ["city"],
			"additionalProperties": false
		}
	},
	"required": ["name"],
	"additionalProperties": false
}`

func TestValidateJSON(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		value  string
		want   []string // problems; nil: valid
	}{
		{"valid", personSchema, `{"name":"Ada","age":36,"tags":["x"],"address":{"city":"London"}}`, nil},
		{"missing required", personSchema, `{"age":1}`, []string{"missing property 'name'"}},
		{"wrong type", personSchema, `{"name":"Ada","age":"old"}`, []string{"at /age: got string, want integer"}},
		{"below minimum", personSchema, `{"name":"Ada","age":-1}`, []string{"at /age: minimum: got -1, want 0"}},
		{"nested", personSchema, `{"name":"Ada","address":{}}`, []string{"at /address: missing property 'city'"}},
		{"array item", personSchema, `{"name":"Ada","tags":["a",2]}`, []string{"at /tags/1: got number, want string"}},
		{
			"several problems, sorted", personSchema, `{"name":"","age":1.5,"zz":1,"aa":2}`,
			[]string{
				"additional properties 'aa', 'zz' not allowed",
				"at /age: got number, want integer",
				"at /name: minLength: got 0, want 1",
			},
		},
		{"not JSON", personSchema, `{"name":`, []string{"not valid JSON: unexpected EOF"}},
		{"empty value", personSchema, ``, []string{"not valid JSON: EOF"}},
		{"trailing data", personSchema, `{"name":"a"} {}`, []string{"not valid JSON: invalid character after top-level value"}},
		{"empty schema accepts anything", ``, `[1,"two"]`, nil},
		{"null schema accepts anything", `null`, `3`, nil},
		{"true schema", `true`, `{"x":1}`, nil},
		{"false schema", `false`, `{}`, []string{"false schema"}},
		{"boolean answer", `{"type":"boolean"}`, `"yes"`, []string{"got string, want boolean"}},
		{"enum", `{"enum":["red","green"]}`, `"blue"`, []string{"value must be one of 'red', 'green'"}},
		{"pointer escaping", `{"type":"object","properties":{"a/b":{"type":"string"}}}`, `{"a/b":1}`,
			[]string{"at /a~1b: got number, want string"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateJSON(json.RawMessage(tt.schema), json.RawMessage(tt.value))
			var got []string
			if err != nil {
				var verr *InvalidValueError
				if !errors.As(err, &verr) {
					t.Fatalf("ValidateJSON error %v (%T), want *InvalidValueError", err, err)
				}
				got = verr.Problems
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// The session workflow validates answers during replay, so the same input must
// give the same message every time, although the validator walks objects
// in Go's randomized map order.
func TestValidateJSONIsDeterministic(t *testing.T) {
	var props, value []string
	for i := range 20 {
		props = append(props, fmt.Sprintf(`"p%02d":{"type":"integer"}`, i))
		value = append(value, fmt.Sprintf(`"p%02d":"x","extra%02d":1`, i, i))
	}
	schema := json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{` + strings.Join(props, ",") + `}}`)
	doc := json.RawMessage(`{` + strings.Join(value, ",") + `}`)
	want := ValidateJSON(schema, doc).Error()
	for range 50 {
		schemaCache.Lock()
		clear(schemaCache.byText) // recompile too, not only revalidate
		schemaCache.order = nil
		schemaCache.Unlock()
		if got := ValidateJSON(schema, doc).Error(); got != want {
			t.Fatalf("message changed between calls:\nfirst: %s\nlater: %s", want, got)
		}
	}
}

func TestValidateJSONRejectsBadSchemas(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		want   string // substring of the error
	}{
		{"not JSON", `{"type":`, "not valid JSON"},
		{"unknown type", `{"type":"strin"}`, "tool: invalid JSON Schema"},
		{"bad regexp", `{"type":"string","pattern":"("}`, "tool: invalid JSON Schema"},
		{"remote reference", `{"$ref":"https://example.com/schema.json"}`, "only self-contained schemas"},
		{"relative file reference", `{"$ref":"other.json"}`, "only self-contained schemas"},
		{"absolute file reference", `{"$ref":"file:///etc/passwd"}`, "only self-contained schemas"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateJSON(json.RawMessage(tt.schema), json.RawMessage(`"x"`))
			if !errors.Is(err, ErrInvalidSchema) {
				t.Fatalf("ValidateJSON error %v, want ErrInvalidSchema", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
			if err := CheckSchema(json.RawMessage(tt.schema)); !errors.Is(err, ErrInvalidSchema) {
				t.Errorf("CheckSchema error %v, want ErrInvalidSchema", err)
			}
		})
	}
}

func TestValidateJSONLocalReferences(t *testing.T) {
	schema := json.RawMessage(`{"$defs":{"id":{"type":"integer"}},"type":"object","properties":{"a":{"$ref":"#/$defs/id"}}}`)
	if err := ValidateJSON(schema, json.RawMessage(`{"a":1}`)); err != nil {
		t.Errorf("valid value: %v", err)
	}
	err := ValidateJSON(schema, json.RawMessage(`{"a":"x"}`))
	var verr *InvalidValueError
	if !errors.As(err, &verr) {
		t.Fatalf("error %v, want *InvalidValueError", err)
	}
	if diff := cmp.Diff([]string{"at /a: got string, want integer"}, verr.Problems); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

func TestSchemaCacheIsBounded(t *testing.T) {
	for i := range maxCachedSchemas + 10 {
		if err := CheckSchema(json.RawMessage(fmt.Sprintf(`{"maximum":%d}`, i))); err != nil {
			t.Fatal(err)
		}
	}
	schemaCache.Lock()
	n, order := len(schemaCache.byText), len(schemaCache.order)
	schemaCache.Unlock()
	if n > maxCachedSchemas || n != order {
		t.Errorf("cache holds %d schemas (%d in order), want at most %d", n, order, maxCachedSchemas)
	}
	// An evicted schema still validates: it is compiled again.
	if err := ValidateJSON(json.RawMessage(`{"maximum":0}`), json.RawMessage(`1`)); err == nil {
		t.Error("evicted schema accepted 1 > maximum 0")
	}
}
