package tool

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp/syntax"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// expandingSchema is the attack of an expanding $defs: 1.4 KB at depth 20, each level of
// $defs an anyOf of two references to the level below, so that checking
// one value at one place evaluates 2^depth subschemas.
func expandingSchema(depth int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"$defs":{%s},"$ref":"#/$defs/l%d"}`, expandingDefs(depth), depth))
}

func expandingDefs(depth int) string {
	defs := []string{`"l0":{"type":"string"}`}
	for i := 1; i <= depth; i++ {
		defs = append(defs, fmt.Sprintf(`"l%d":{"anyOf":[{"$ref":"#/$defs/l%d"},{"$ref":"#/$defs/l%d"}]}`, i, i-1, i-1))
	}
	return strings.Join(defs, ",")
}

// descendingSchema passes any bound on one place: each level checks the
// value's items twice, so a value nested n deep whose innermost item fails
// costs 2^n evaluations.
const descendingSchema = `{"type":"array","anyOf":[{"items":{"$ref":"#"}},{"items":{"$ref":"#"}}]}`

func nestedArray(depth int, inner string) json.RawMessage {
	return json.RawMessage(strings.Repeat("[", depth) + inner + strings.Repeat("]", depth))
}

// The reported attack is refused where schemas enter, and a value checked
// against it anyway (a schema accepted before this check existed) fails
// at once instead of running for minutes.
func TestExpandingSchemaIsRefused(t *testing.T) {
	schema := expandingSchema(20)
	if len(schema) > 1500 {
		t.Fatalf("the attack is %d bytes, want about 1.4 KB", len(schema))
	}
	err := CheckSchema(schema)
	if !errors.Is(err, ErrInvalidSchema) {
		t.Fatalf("CheckSchema: %v, want ErrInvalidSchema", err)
	}
	if err := ValidateJSON(schema, json.RawMessage(`123`)); !errors.Is(err, ErrInvalidSchema) {
		t.Fatalf("ValidateJSON: %v, want ErrInvalidSchema", err)
	}
}

// A value whose check would multiply across its nesting is refused as a
// problem before the validator runs.
func TestDescendingCostIsBounded(t *testing.T) {
	if err := CheckSchema(json.RawMessage(descendingSchema)); err != nil {
		t.Fatalf("CheckSchema: %v", err)
	}
	if err := ValidateJSON(json.RawMessage(descendingSchema), nestedArray(5, `[]`)); err != nil {
		t.Errorf("a shallow valid value: %v", err)
	}
	err := ValidateJSON(json.RawMessage(descendingSchema), nestedArray(40, `1`))
	var verr *InvalidValueError
	if !errors.As(err, &verr) || len(verr.Problems) != 1 || !strings.Contains(verr.Problems[0], "too costly") {
		t.Fatalf("ValidateJSON: %v, want one problem saying the value is too costly to check", err)
	}
}

// worstCases are shapes of schema and value that make the validator work
// hard per unit of the estimate, each built at a size n.
var worstCases = []struct {
	name  string
	build func(n int) (schema, value string)
}{
	{"wide objects", func(n int) (string, string) {
		return `{"type":"array","items":` + personSchema + `}`,
			"[" + strings.TrimSuffix(strings.Repeat(`{"name":"Ada","age":36,"tags":["x","y"],"address":{"city":"L"}},`, n), ",") + "]"
	}},
	{"descending anyOf", func(n int) (string, string) {
		return descendingSchema, string(nestedArray(n, "1"))
	}},
	{"in-place expansion", func(n int) (string, string) {
		return `{"$defs":{` + expandingDefs(7) + `},"items":{"$ref":"#/$defs/l7"}}`, `[` + strings.TrimSuffix(strings.Repeat(`1,`, n), ",") + `]`
	}},
	{"deep failing recursion", func(n int) (string, string) {
		return `{"type":"array","items":{"$ref":"#"},"minItems":2}`, string(nestedArray(n, ""))
	}},
	{"long string and pattern", func(n int) (string, string) {
		return `{"type":"string","pattern":"^([a-z]{1,30}[0-9]?){1,30}$"}`, `"` + strings.Repeat("a", n) + `!"`
	}},
	{"long numbers", func(n int) (string, string) {
		return `{"type":"integer","minimum":0,"multipleOf":3,"enum":[1,2,3]}`, strings.Repeat("7", n)
	}},
	{"exponents", func(n int) (string, string) {
		return `{"type":"integer","maximum":5}`, fmt.Sprintf("1e%d", n)
	}},
	{"unique items", func(n int) (string, string) {
		return `{"type":"array","uniqueItems":true}`, "[" + strings.TrimSuffix(strings.Repeat(`[1.5,"ab",{"k":[2]}],`, n), ",") + "]"
	}},
	{"many keys and patterns", func(n int) (string, string) {
		var keys []string
		for i := range n {
			keys = append(keys, fmt.Sprintf(`"key%d":%d`, i, i))
		}
		return `{"patternProperties":{"^a.*z$":{},"^k[0-9]?e+y[0-9]+$":{"type":"string"},"[xyz]{3}":{}},"propertyNames":{"maxLength":20}}`,
			"{" + strings.Join(keys, ",") + "}"
	}},
	{"formats", func(n int) (string, string) {
		return `{"type":"array","items":{"anyOf":[{"format":"email"},{"format":"date-time"},{"format":"hostname"},{"format":"uri"},{"format":"regex"}]}}`,
			"[" + strings.TrimSuffix(strings.Repeat(`"`+strings.Repeat("a(b", 20)+`",`, n), ",") + "]"
	}},
	{"big enum", func(n int) (string, string) {
		var enum []string
		for i := range 500 {
			enum = append(enum, fmt.Sprintf(`"value-%d"`, i))
		}
		return `{"type":"array","items":{"enum":[` + strings.Join(enum, ",") + `]}}`,
			"[" + strings.TrimSuffix(strings.Repeat(`"value-x",`, n), ",") + "]"
	}},
	{"unevaluated", func(n int) (string, string) {
		var keys []string
		for i := range n {
			keys = append(keys, fmt.Sprintf(`"k%d":1`, i))
		}
		return `{"allOf":[{"properties":{"a":{}}},{"properties":{"b":{}}},{"anyOf":[{"required":["c"]},{"properties":{"k1":{}}}]}],"unevaluatedProperties":{"type":"string"}}`,
			"{" + strings.Join(keys, ",") + "}"
	}},
}

// largestWithinBudget is the largest n at which case c's value is still
// checked (its estimate within MaxValidationWork), and the estimate.
func largestWithinBudget(t testing.TB, build func(int) (string, string)) (int, int64) {
	fits := func(n int) (int64, bool) {
		schema, value := build(n)
		c, err := compiled(json.RawMessage(schema))
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(value))
		if err != nil {
			t.Fatal(err)
		}
		return c.bound.work(doc)
	}
	lo, hi := 1, 2
	for {
		if _, ok := fits(hi); !ok {
			break
		}
		if hi > 1<<20 {
			t.Fatalf("still within the budget at n=%d", hi)
		}
		lo, hi = hi, hi*2
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if _, ok := fits(mid); ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	units, _ := fits(lo)
	return lo, units
}

// BenchmarkValidateJSONWorstCases checks, for each worst case at the
// largest size still within the budget, how long the check takes per unit
// of the estimate: below 1 ns everywhere means MaxValidationWork bounds a
// check at about MaxValidationWork nanoseconds.
func BenchmarkValidateJSONWorstCases(b *testing.B) {
	for _, c := range worstCases {
		b.Run(c.name, func(b *testing.B) {
			n, units := largestWithinBudget(b, c.build)
			schema, value := c.build(n)
			cpu := cpuTime()
			b.ResetTimer()
			for b.Loop() {
				if err := ValidateJSON(json.RawMessage(schema), json.RawMessage(value)); err != nil {
					var verr *InvalidValueError
					if !errors.As(err, &verr) || strings.Contains(verr.Error(), "too costly") {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(n), "n")
			b.ReportMetric(float64(units), "units")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(units), "ns/unit")
			// CPU time too: on a shared machine, wall time counts waiting.
			b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N)/float64(units), "cpu-ns/unit")
		})
	}
}

// cpuTime is the CPU time this process has used, in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// Each limit refuses a schema where it enters, with ErrSchemaTooCostly,
// and a schema just inside it is kept.
func TestSchemaLimits(t *testing.T) {
	repeat := func(s string, n int) string { return strings.Repeat(s, n) }
	tests := []struct {
		name    string
		schema  string
		refused bool
		want    string // substring of the refusal
	}{
		{"nesting at the limit", repeat(`{"items":`, 63) + `{}` + repeat(`}`, 63), false, ""},
		{"nesting past the limit", repeat(`{"items":`, 64) + `{}` + repeat(`}`, 64), true, "tool.MaxSchemaDepth"},
		{"expansion at the limit", string(expandingSchema(7)), false, ""},
		{"expansion past the limit", string(expandingSchema(8)), true, "more than 1000 subschemas at one place"},
		{"expansion under a property", `{"$defs":{` + expandingDefs(8) + `},"properties":{"a":{"$ref":"#/$defs/l8"}}}`, true, "the subschema at #/"},
		{"cycle in place", `{"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/b"},{"type":"string"}]},"b":{"allOf":[{"$ref":"#/$defs/a"}]}},"$ref":"#/$defs/a"}`,
			true, "refers to itself without moving into the value"},
		{"self in place", `{"not":{"$ref":"#"}}`, true, "refers to itself"},
		{"recursion through items", `{"anyOf":[{"type":"string"},{"type":"array","items":{"$ref":"#"}}]}`, false, ""},
		{"pattern at the limit", `{"pattern":"` + repeat(`[a-z]{999}`, 4) + `"}`, false, ""},
		{"pattern past the limit", `{"pattern":"` + repeat(`[a-z]{1000}`, 5) + `"}`, true, "tool.MaxPatternSize"},
		{"pattern property past the limit", `{"patternProperties":{"` + repeat(`x{1000}`, 5) + `":{}}}`, true, "tool.MaxPatternSize"},
		{"patterns together", `{"properties":{` + strings.TrimSuffix(repeat(`"a":{"pattern":"(ab){1000}"},`, 1), ",") +
			`},"allOf":[` + strings.TrimSuffix(repeat(`{"pattern":"[a-z]{900}[0-9]{900}[A-Z]{900}"},`, 8), ",") + `]}`, true, "tool.MaxSchemaPatternSize"},
		{"float64 range", `{"maximum":1.7976931348623157e308,"minimum":-5e-324,"multipleOf":0.01}`, false, ""},
		{"huge exponent", `{"maximum":1e999999}`, true, "tool.MaxSchemaNumberDigits"},
		{"huge enum number", `{"enum":[1,` + repeat("9", 401) + `]}`, true, "tool.MaxSchemaNumberDigits"},
		{"huge number in an annotation", `{"default":1e99999999999999}`, true, "tool.MaxSchemaNumberDigits"},
		{"metaschema", `{"$ref":"https://json-schema.org/draft/2020-12/schema"}`, false, ""},
		{"draft 2019-09 recursion", `{"$schema":"https://json-schema.org/draft/2019-09/schema","$recursiveAnchor":true,
			"type":"object","properties":{"kids":{"type":"array","items":{"$recursiveRef":"#"}}}}`, false, ""},
		{"draft-07 definitions", `{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"n":{"type":"integer"}},
			"type":"array","items":{"$ref":"#/definitions/n"}}`, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckSchema(json.RawMessage(tt.schema))
			if !tt.refused {
				if err != nil {
					t.Fatalf("CheckSchema: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrSchemaTooCostly) || !errors.Is(err, ErrInvalidSchema) {
				t.Fatalf("CheckSchema: %v, want ErrSchemaTooCostly", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("CheckSchema: %q does not say %q", err, tt.want)
			}
		})
	}
}

// A value whose check would be costly, however it is costly, is refused
// unchecked; the same shapes, small, are checked as usual.
func TestCostlyValues(t *testing.T) {
	tests := []struct {
		name, schema, value string
		costly              bool
	}{
		{"huge exponent, checked as an integer", `{"type":"integer"}`, `1e999999`, true},
		{"huge exponent, not read as a number", `{"type":"number"}`, `1e999999`, false},
		{"long digits, compared", `{"enum":[1,2,3]}`, strings.Repeat("7", 100000), true},
		{"a short number", `{"type":"integer","minimum":0,"multipleOf":7}`, `700000000000000000000`, false},
		{"deep nesting into a recursive schema", `{"type":"array","items":{"$ref":"#"}}`, string(nestedArray(2000, "")), true},
		{"deep nesting the schema ignores", `{"type":"array"}`, string(nestedArray(2000, "")), false},
		{"long string, large pattern", `{"pattern":"^[a-z]{1000}$"}`, `"` + strings.Repeat("a", 200000) + `"`, true},
		{"long string, no pattern", `{"type":"string","minLength":1}`, `"` + strings.Repeat("a", 100000) + `"`, false},
		{"many items, each checked", `{"items":{"type":"integer"}}`, `[` + strings.TrimSuffix(strings.Repeat("1,", 100000), ",") + `]`, true},
		{"many items, unchecked", `{"type":"array","maxItems":200000}`, `[` + strings.TrimSuffix(strings.Repeat("1,", 100000), ",") + `]`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateJSON(json.RawMessage(tt.schema), json.RawMessage(tt.value))
			var verr *InvalidValueError
			costly := errors.As(err, &verr) && slices.Equal(verr.Problems, []string{tooCostly})
			if costly != tt.costly {
				t.Errorf("ValidateJSON: %v; want too costly: %v", err, tt.costly)
			}
		})
	}
}

// Legitimate recursion is checked in full: a tree of objects through
// properties, and a schema extended through $dynamicRef.
func TestRecursiveSchemasStillValidate(t *testing.T) {
	tree := json.RawMessage(`{"type":"object","required":["name"],"properties":{"name":{"type":"string"},
		"children":{"type":"array","items":{"$ref":"#"}}},"additionalProperties":false}`)
	var node func(depth int) string
	node = func(depth int) string {
		if depth == 0 {
			return `{"name":"leaf"}`
		}
		kid := node(depth - 1)
		return `{"name":"n","children":[` + kid + `,` + kid + `,` + kid + `]}`
	}
	if err := ValidateJSON(tree, json.RawMessage(node(5))); err != nil {
		t.Errorf("a tree of 364 nodes: %v", err)
	}
	err := ValidateJSON(tree, json.RawMessage(`{"name":"n","children":[{"name":1}]}`))
	var verr *InvalidValueError
	if !errors.As(err, &verr) || !slices.Equal(verr.Problems, []string{"at /children/0/name: got number, want string"}) {
		t.Errorf("a bad leaf: %v", err)
	}
	// The bounds change no verdict of a schema extended through
	// $dynamicRef: the library alone gives the same.
	list := json.RawMessage(`{"$id":"https://example.com/strings","$ref":"list","$defs":{
		"item":{"$dynamicAnchor":"item","type":"string"},
		"list":{"$id":"list","type":"array","items":{"$dynamicRef":"#item"},"$defs":{"item":{"$dynamicAnchor":"item"}}}}}`)
	c, err := compiled(list)
	if err != nil {
		t.Fatalf("CheckSchema: %v", err)
	}
	for _, value := range []string{`["a","b"]`, `[1]`, `[["a"]]`, `"a"`} {
		doc, _ := jsonschema.UnmarshalJSON(strings.NewReader(value))
		if got, want := ValidateJSON(list, json.RawMessage(value)) == nil, c.sch.Validate(doc) == nil; got != want {
			t.Errorf("%s: valid %v, the library says %v", value, got, want)
		}
	}
}

// A value with many problems reports the first maxProblems in a fixed
// order, and counts the rest.
func TestProblemsAreBounded(t *testing.T) {
	value := `[` + strings.TrimSuffix(strings.Repeat(`"x",`, 500), ",") + `]`
	var first []string
	for range 5 {
		err := ValidateJSON(json.RawMessage(`{"items":{"type":"integer"}}`), json.RawMessage(value))
		var verr *InvalidValueError
		if !errors.As(err, &verr) {
			t.Fatalf("ValidateJSON: %v", err)
		}
		if len(verr.Problems) != maxProblems+1 || verr.Problems[maxProblems] != "and 480 more" {
			t.Fatalf("problems: %q", verr.Problems)
		}
		if first == nil {
			first = verr.Problems
		} else if !slices.Equal(first, verr.Problems) {
			t.Fatalf("problems changed between calls:\n%q\n%q", first, verr.Problems)
		}
	}
	if first[0] != "at /0: got string, want integer" {
		t.Errorf("first problem %q, want the first item's", first[0])
	}
}

// A refusal reads the same every time the schema is compiled: a run that
// ends on it replays as it ran.
func TestRefusalIsDeterministic(t *testing.T) {
	schema := json.RawMessage(`{"$defs":{` + expandingDefs(9) + `},"properties":{"b":{"$ref":"#/$defs/l9"},"a":{"$ref":"#/$defs/l8"}}}`)
	want := CheckSchema(schema).Error()
	for range 20 {
		schemaCache.Lock()
		clear(schemaCache.byText)
		schemaCache.order = nil
		schemaCache.Unlock()
		if got := CheckSchema(schema).Error(); got != want {
			t.Fatalf("refusal changed:\n%s\n%s", want, got)
		}
	}
}

// programSize never guesses a program smaller than regexp compiles.
func TestProgramSizeIsAnUpperBound(t *testing.T) {
	for _, expr := range []string{`[a-z]{999}`, `(ab){1000}`, `x{2,}`, `(a|b|c)+`, `^[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,}$`,
		`(?i)hello{3,5}`, `((a{10}){10}){10}`, `.{0,1000}`, `(x+x+)+y`, `\pL{5,20}|\d{1,3}(?:,\d{3})*`, `(?:a{2}b?){3,7}`} {
		re, err := syntax.Parse(expr, syntax.Perl)
		if err != nil {
			t.Fatal(err)
		}
		prog, err := syntax.Compile(re.Simplify())
		if err != nil {
			t.Fatal(err)
		}
		if got := programSize(re); got < len(prog.Inst)-2 {
			t.Errorf("%s: estimated %d instructions, compiles to %d", expr, got, len(prog.Inst))
		}
	}
	// A string checked as "format": "regex" is held to MaxPatternSize too.
	err := ValidateJSON(json.RawMessage(`{"format":"regex"}`), json.RawMessage(`"`+strings.Repeat(`[a-z]{1000}`, 5)+`"`))
	var verr *InvalidValueError
	if !errors.As(err, &verr) || !strings.Contains(verr.Error(), "tool.MaxPatternSize") {
		t.Errorf("a huge regular expression as a value: %v", err)
	}
}
