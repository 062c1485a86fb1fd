package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"

	"github.com/keelrun/keel"
)

// Limits of an output schema (RunConfig.OutputSchema, docs/contract.md
// §21.1). A schema comes from a caller, so it is bounded before anything
// parses it as a schema: its size, then its nesting, then whether it
// compiles (the worker compiles it without loading any reference, so a
// remote "$ref" is refused, never fetched).
const (
	// MaxOutputSchemaBytes bounds an output schema's JSON.
	MaxOutputSchemaBytes = 32 << 10
	// MaxOutputSchemaDepth bounds the nesting of its objects and arrays.
	MaxOutputSchemaDepth = 32
)

// CheckOutputSchema checks what a caller sent as an output schema before
// anything compiles it: a JSON object of at most MaxOutputSchemaBytes,
// nested at most MaxOutputSchemaDepth deep. Nil or empty means none. Its
// errors are keel.InvalidInput, keel.TooLarge for the size; none repeats
// the schema.
func CheckOutputSchema(schema json.RawMessage) error {
	if len(schema) == 0 {
		return nil
	}
	if len(schema) > MaxOutputSchemaBytes {
		return keel.Errorf(keel.CodeTooLarge, "output_schema is %d bytes; the limit is %d", len(schema), MaxOutputSchemaBytes)
	}
	trimmed := bytes.TrimSpace(schema)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return keel.Errorf(keel.CodeInvalidInput, "output_schema must be a JSON Schema object")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	depth := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return keel.Errorf(keel.CodeInvalidInput, "output_schema is not valid JSON")
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
			if depth > MaxOutputSchemaDepth {
				return keel.Errorf(keel.CodeInvalidInput, "output_schema nests deeper than %d levels", MaxOutputSchemaDepth)
			}
		case json.Delim('}'), json.Delim(']'):
			depth--
			if depth == 0 && dec.More() {
				return keel.Errorf(keel.CodeInvalidInput, "output_schema holds more than one JSON value")
			}
		}
	}
	if depth != 0 {
		return keel.Errorf(keel.CodeInvalidInput, "output_schema is not valid JSON")
	}
	return nil
}
