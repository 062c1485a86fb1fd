package tool

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// ErrInvalidSchema reports a JSON Schema that does not compile.
var ErrInvalidSchema = errors.New("tool: invalid JSON Schema")

// InvalidValueError says a JSON value does not match its schema. Problems
// lists every violation found, sorted, one per entry, such as
// `at /limit: got string, want integer`, so that the message is the same on
// every run (the session workflow, which validates during replay, relies
// on that).
type InvalidValueError struct {
	Problems []string
}

func (e *InvalidValueError) Error() string {
	return "value does not match the schema: " + strings.Join(e.Problems, "; ")
}

// ValidateJSON reports whether value is valid JSON matching schema. An empty
// or null schema accepts any JSON value. It returns an *InvalidValueError
// for a value that is not JSON or does not match, and an error wrapping
// ErrInvalidSchema for a schema that does not compile.
//
// ValidateJSON is deterministic and does no I/O, so workflow code may
// call it: schemas never load remote or local references (only the
// embedded draft metaschemas), and problems are reported in sorted order.
// Its work is bounded: a schema must pass CheckSchema's limits, and a value
// whose check could cost more than MaxValidationWork is refused unchecked,
// with a single problem saying so (docs/contract.md §21.1).
// The "format" keyword is asserted, not only annotated.
// Compiled schemas are cached by their exact bytes.
func ValidateJSON(schema, value json.RawMessage) error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(value))
	if err != nil {
		return &InvalidValueError{Problems: []string{"not valid JSON: " + err.Error()}}
	}
	c, err := compiled(schema)
	if err != nil {
		return err
	}
	if c.sch == nil {
		return nil
	}
	if _, ok := c.bound.work(doc); !ok {
		return &InvalidValueError{Problems: []string{tooCostly}}
	}
	if err := c.sch.Validate(doc); err != nil {
		var verr *jsonschema.ValidationError
		if errors.As(err, &verr) {
			return &InvalidValueError{Problems: problems(verr)}
		}
		return &InvalidValueError{Problems: []string{err.Error()}}
	}
	return nil
}

// CheckSchema reports whether schema is a JSON Schema that ValidateJSON can
// use. Check schemas where they enter (a tool's spec, an ask_user request)
// so that later validation fails only on values. A schema over the limits
// MaxSchemaDepth, MaxInPlaceSubschemas, MaxPatternSize,
// MaxSchemaPatternSize or MaxSchemaNumberDigits is refused with an error wrapping
// ErrSchemaTooCostly.
func CheckSchema(schema json.RawMessage) error {
	_, err := compiled(schema)
	return err
}

// schemaURL is the location compiled schemas live at. It is absolute so the
// compiler never consults the working directory, and relative references
// resolve under it, where nothing can be loaded.
const schemaURL = "mem:///keel/schema.json"

// maxCachedSchemas bounds the cache: schemas from host-input requests are
// unbounded in variety, and a worker lives for a long time.
const maxCachedSchemas = 512

// cachedSchema is a compiled schema and its bounds, or why it was
// refused: refusals are cached too, so a refused schema sent again costs
// a lookup.
type cachedSchema struct {
	sch   *jsonschema.Schema // nil: accept anything
	bound *schemaBound
	err   error
}

var schemaCache = struct {
	sync.Mutex
	byText map[string]cachedSchema
	order  []string // insertion order, for eviction
}{byText: map[string]cachedSchema{}}

func compiled(schema json.RawMessage) (cachedSchema, error) {
	key := string(schema)
	schemaCache.Lock()
	c, ok := schemaCache.byText[key]
	schemaCache.Unlock()
	if ok {
		return c, c.err
	}
	c.sch, c.bound, c.err = compile(schema)
	schemaCache.Lock()
	defer schemaCache.Unlock()
	if _, ok := schemaCache.byText[key]; !ok {
		if len(schemaCache.order) >= maxCachedSchemas {
			delete(schemaCache.byText, schemaCache.order[0])
			schemaCache.order = schemaCache.order[1:]
		}
		schemaCache.byText[key] = c
		schemaCache.order = append(schemaCache.order, key)
	}
	return c, c.err
}

func compile(schema json.RawMessage) (*jsonschema.Schema, *schemaBound, error) {
	trimmed := bytes.TrimSpace(schema)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return nil, nil, nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(trimmed))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: not valid JSON: %v", ErrInvalidSchema, err)
	}
	// Before compiling: checking the schema against its metaschema costs
	// the square of its depth or more, and reads numbers as exact
	// rationals.
	if err := checkDocument(doc, 1); err != nil {
		return nil, nil, err
	}
	patterns := &patternEngine{}
	c := jsonschema.NewCompiler()
	c.UseRegexpEngine(patterns.compile)
	c.DefaultDraft(jsonschema.Draft2020)
	// Formats are asserted: a "date-time" that is not one should be
	// reported as a schema problem, not as a decoding failure later.
	c.AssertFormat()
	c.UseLoader(noLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	sch, err := c.Compile(schemaURL)
	patterns.sealed = true
	if err != nil {
		if patterns.refused != nil {
			// Wherever the compiler reports it, a refused pattern is why.
			return nil, nil, fmt.Errorf("%w: %v", ErrSchemaTooCostly, patterns.refused)
		}
		var serr *jsonschema.SchemaValidationError
		var verr *jsonschema.ValidationError
		if errors.As(err, &serr) && errors.As(serr.Err, &verr) {
			return nil, nil, fmt.Errorf("%w: %s", ErrInvalidSchema, strings.Join(problems(verr), "; "))
		}
		return nil, nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	b, err := bound(sch)
	if err != nil {
		return nil, nil, err
	}
	return sch, b, nil
}

// checkDocument refuses a schema nested deeper than MaxSchemaDepth or
// holding a number over MaxSchemaNumberDigits, wherever it is.
func checkDocument(doc any, depth int) error {
	switch doc.(type) {
	case map[string]any, []any:
		if depth > MaxSchemaDepth {
			return fmt.Errorf("%w: it nests deeper than %d levels (tool.MaxSchemaDepth)", ErrSchemaTooCostly, MaxSchemaDepth)
		}
	}
	switch v := doc.(type) {
	case json.Number:
		if numberScale(string(v)) > MaxSchemaNumberDigits {
			return fmt.Errorf("%w: a number has more than %d digits with its exponent (tool.MaxSchemaNumberDigits)", ErrSchemaTooCostly, MaxSchemaNumberDigits)
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			if err := checkDocument(v[k], depth+1); err != nil {
				return err
			}
		}
	case []any:
		for _, c := range v {
			if err := checkDocument(c, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// noLoader refuses every reference to another document: validation must
// not depend on the file system or the network.
type noLoader struct{}

func (noLoader) Load(string) (any, error) {
	return nil, errors.New("only self-contained schemas are supported")
}

var printer = message.NewPrinter(language.English)

// maxProblems bounds the problems reported for one value: formatting one
// costs microseconds, a value may have thousands, and their reader (a
// model, a host) needs the first few.
const maxProblems = 20

// problems flattens a validation error tree into its leaves, formatted and
// sorted. The validator walks objects in map order, so the raw tree's order
// (and the order of names inside some messages) varies between runs. Past
// maxProblems, the leaves first in the order of their place in the value
// and in the schema are reported, and a last entry counts the others.
func problems(verr *jsonschema.ValidationError) []string {
	var leaves []*jsonschema.ValidationError
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			leaves = append(leaves, e)
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(verr)
	more := len(leaves) - maxProblems
	if more > 0 {
		// Leaves equal in this order have the same message, so the ones
		// kept read the same on every run.
		type leaf struct {
			e       *jsonschema.ValidationError
			keyword []string
		}
		sorted := make([]leaf, len(leaves))
		for i, e := range leaves {
			sorted[i] = leaf{e, e.ErrorKind.KeywordPath()}
		}
		slices.SortFunc(sorted, func(a, b leaf) int {
			return cmp.Or(slices.Compare(a.e.InstanceLocation, b.e.InstanceLocation),
				strings.Compare(a.e.SchemaURL, b.e.SchemaURL), slices.Compare(a.keyword, b.keyword))
		})
		for i := range maxProblems {
			leaves[i] = sorted[i].e
		}
		leaves = leaves[:maxProblems]
	}
	out := make([]string, 0, len(leaves)+1)
	for _, e := range leaves {
		if k, ok := e.ErrorKind.(*kind.AdditionalProperties); ok {
			slices.Sort(k.Properties)
		}
		msg := e.ErrorKind.LocalizedString(printer)
		if loc := e.InstanceLocation; len(loc) > 0 {
			msg = "at " + pointer(loc) + ": " + msg
		}
		out = append(out, msg)
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if more > 0 {
		out = append(out, fmt.Sprintf("and %d more", more))
	}
	return out
}

var pointerEscape = strings.NewReplacer("~", "~0", "/", "~1")

func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(pointerEscape.Replace(t))
	}
	return b.String()
}
