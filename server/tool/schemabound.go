package tool

import (
	"fmt"
	"maps"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Limits on what checking a value against a JSON Schema may cost
// (docs/contract.md §21.1). A run validates answers in its own workflow
// code, where work must be bounded and deterministic, and schemas come
// from callers, models and MCP servers: a 1.4 KB schema whose $defs each
// reference the one below twice made one check evaluate 2^20 subschemas.
// So a schema is refused where it enters (CheckSchema) unless what it
// evaluates at one place of a value is bounded, and before each check
// ValidateJSON bounds the whole check's work over the given value.
const (
	// MaxSchemaDepth bounds the nesting of a schema's objects and arrays:
	// checking a schema against its metaschema costs more than the square
	// of its depth (an invalid schema 1,000 deep took seconds and
	// gigabytes).
	MaxSchemaDepth = 64
	// MaxInPlaceSubschemas bounds the subschemas a schema evaluates at one
	// place of a value through $ref, allOf, anyOf, oneOf, not,
	// if/then/else, dependentSchemas and dynamic references, each counted
	// every time it is reached. A schema that reaches itself there, without
	// moving into the value, is refused too.
	MaxInPlaceSubschemas = 1000
	// MaxPatternSize bounds one regular expression of a schema ("pattern",
	// "patternProperties") or one string checked as "format": "regex", in
	// instructions of its compiled program (`a{1000}` has about 1,000).
	// Matching costs each instruction per byte matched.
	MaxPatternSize = 4000
	// MaxSchemaPatternSize bounds a schema's regular expressions together,
	// and so the time it takes to compile them.
	MaxSchemaPatternSize = 20000
	// MaxSchemaNumberDigits bounds each number written in a schema: its
	// digits plus the size of its exponent (1e308 has 309). The validator
	// computes with exact rationals, whose cost grows with that size's
	// square: `1e999999` alone takes tens of milliseconds.
	MaxSchemaNumberDigits = 400
	// MaxValidationWork bounds one check of a value against a schema, in
	// units of about a nanosecond of the validator's work, as estimated
	// before the check (server/tool/schemacost.go). A value whose check could cost
	// more is refused unchecked.
	MaxValidationWork = 100_000_000
)

// ErrSchemaTooCostly reports a schema refused because checking a value
// against it could not be bounded by the limits above. It wraps
// ErrInvalidSchema.
var ErrSchemaTooCostly = fmt.Errorf("%w: too costly to evaluate", ErrInvalidSchema)

// tooCostly is the problem of a value whose check could cost more than
// MaxValidationWork.
var tooCostly = fmt.Sprintf("the value is too costly to check against this schema (more than %d units of work)", MaxValidationWork)

// schemaBound is a compiled schema as the bounds see it: each subschema's
// in-place children (summed) and dynamic references (the costliest target
// counts), and what it costs whatever the value.
type schemaBound struct {
	index  map[*jsonschema.Schema]int32
	nodes  []boundNode
	groups []refGroup
	// chain is the longest chain of in-place subschemas: the validator
	// walks it back on every evaluation, looking for a cycle.
	chain int64
}

type boundNode struct {
	s       *jsonschema.Schema
	inPlace []int32
	dynamic []dynamicEdge
	// fixed is the work of one evaluation whatever the value, wanted the
	// number of its enum and const values, numberOps how often it reads a
	// number value as an exact rational (schemacost.go).
	fixed, wanted, numberOps int64
	expansion                int64 // subschemas evaluated at one place, from here
	depth                    int64 // longest in-place chain from here
	state                    int8  // 0 unseen, 1 on the walk, 2 done
	uneval                   bool  // see markUneval
}

// A dynamic reference ($dynamicRef, $recursiveRef) resolves at run time
// to its static target or to one schema of its group; the bounds take the
// costliest.
type dynamicEdge struct{ target, group int32 }

type refGroup struct {
	members   []int32
	expansion int64
	depth     int64
	state     int8
}

// bound walks a compiled schema and refuses it when what it evaluates at
// one place cannot be bounded.
func bound(root *jsonschema.Schema) (*schemaBound, error) {
	b := &schemaBound{index: map[*jsonschema.Schema]int32{}}
	b.collect(root)
	b.link(root)
	for i := range b.nodes {
		if err := b.expand(int32(i)); err != nil {
			return nil, err
		}
		if b.nodes[i].expansion > MaxInPlaceSubschemas {
			return nil, fmt.Errorf("%w: %s evaluates more than %d subschemas at one place of a value (tool.MaxInPlaceSubschemas)",
				ErrSchemaTooCostly, where(b.nodes[i].s), MaxInPlaceSubschemas)
		}
		b.chain = max(b.chain, b.nodes[i].depth)
	}
	for i := range b.nodes {
		b.nodes[i].fixedWork(b.chain)
		if s := b.nodes[i].s; s.UnevaluatedProperties != nil || s.UnevaluatedItems != nil {
			b.markUneval(int32(i))
		}
	}
	return b, nil
}

// markUneval marks a subschema and those it applies in place as tracking
// what was evaluated: each of their evaluations copies the value's keys or
// items for unevaluatedProperties or unevaluatedItems.
func (b *schemaBound) markUneval(i int32) {
	n := &b.nodes[i]
	if n.uneval {
		return
	}
	n.uneval = true
	for _, c := range n.inPlace {
		b.markUneval(c)
	}
	for _, e := range n.dynamic {
		b.markUneval(e.target)
		if e.group >= 0 {
			for _, m := range b.groups[e.group].members {
				b.markUneval(m)
			}
		}
	}
}

// collect numbers every subschema reachable from root.
func (b *schemaBound) collect(root *jsonschema.Schema) {
	queue := []*jsonschema.Schema{root}
	add := func(s *jsonschema.Schema) {
		if s == nil {
			return
		}
		if _, ok := b.index[s]; !ok {
			b.index[s] = int32(len(b.nodes))
			b.nodes = append(b.nodes, boundNode{s: s})
			queue = append(queue, s)
		}
	}
	add(root)
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		inPlace(s, add)
		descending(s, add)
		if s.RecursiveRef != nil {
			add(s.RecursiveRef)
		}
		if s.DynamicRef != nil {
			add(s.DynamicRef.Ref)
		}
	}
}

// link records each node's in-place children and dynamic references.
func (b *schemaBound) link(root *jsonschema.Schema) {
	byAnchor := map[string]int32{}
	recursive := int32(-1)
	group := func(key string, members func(*jsonschema.Schema) bool) int32 {
		g, ok := byAnchor[key]
		if !ok {
			g = int32(len(b.groups))
			byAnchor[key] = g
			var rg refGroup
			for i := range b.nodes {
				if members(b.nodes[i].s) {
					rg.members = append(rg.members, int32(i))
				}
			}
			b.groups = append(b.groups, rg)
		}
		return g
	}
	for i := range b.nodes {
		n := &b.nodes[i]
		s := n.s
		inPlace(s, func(c *jsonschema.Schema) { n.inPlace = append(n.inPlace, b.index[c]) })
		if d := s.DynamicRef; d != nil {
			e := dynamicEdge{target: b.index[d.Ref], group: -1}
			// Only a target that declares the anchor resolves dynamically,
			// to a schema declaring the same $dynamicAnchor.
			if d.Anchor != "" && d.Ref.DynamicAnchor == d.Anchor {
				e.group = group("$dynamicAnchor "+d.Anchor, func(m *jsonschema.Schema) bool { return m.DynamicAnchor == d.Anchor })
			}
			n.dynamic = append(n.dynamic, e)
		}
		if r := s.RecursiveRef; r != nil {
			e := dynamicEdge{target: b.index[r], group: -1}
			if r.RecursiveAnchor {
				// The validator resolves it to the outermost schema on the
				// way to it whose resource has $recursiveAnchor: the root,
				// a resource's root, or a reference's target. Their anchors
				// are not exported, so all of those may be it.
				if recursive < 0 {
					targets := map[*jsonschema.Schema]bool{root: true}
					for j := range b.nodes {
						m := b.nodes[j].s
						targets[m.Ref], targets[m.RecursiveRef] = true, true
						if m.DynamicRef != nil {
							targets[m.DynamicRef.Ref] = true
						}
					}
					recursive = group("$recursiveAnchor", func(m *jsonschema.Schema) bool {
						return targets[m] || m.ID != "" || m.RecursiveAnchor
					})
				}
				e.group = recursive
			}
			n.dynamic = append(n.dynamic, e)
		}
	}
}

// expand computes a node's in-place expansion and chain, refusing a cycle.
func (b *schemaBound) expand(i int32) error {
	n := &b.nodes[i]
	switch n.state {
	case 1:
		return fmt.Errorf("%w: %s refers to itself without moving into the value", ErrSchemaTooCostly, where(n.s))
	case 2:
		return nil
	}
	n.state = 1
	exp, depth := int64(1), int64(0)
	for _, c := range b.nodes[i].inPlace {
		if err := b.expand(c); err != nil {
			return err
		}
		exp = capped(exp + b.nodes[c].expansion)
		depth = max(depth, b.nodes[c].depth)
	}
	for _, e := range b.nodes[i].dynamic {
		if err := b.expand(e.target); err != nil {
			return err
		}
		ge, gd := b.nodes[e.target].expansion, b.nodes[e.target].depth
		if e.group >= 0 {
			if err := b.expandGroup(e.group); err != nil {
				return err
			}
			ge, gd = max(ge, b.groups[e.group].expansion), max(gd, b.groups[e.group].depth)
		}
		exp, depth = capped(exp+ge), max(depth, gd)
	}
	n = &b.nodes[i]
	n.expansion, n.depth, n.state = exp, depth+1, 2
	return nil
}

func (b *schemaBound) expandGroup(g int32) error {
	switch b.groups[g].state {
	case 1:
		return fmt.Errorf("%w: a dynamic reference may resolve to a schema that reaches it again without moving into the value", ErrSchemaTooCostly)
	case 2:
		return nil
	}
	b.groups[g].state = 1
	var exp, depth int64
	for _, m := range b.groups[g].members {
		if err := b.expand(m); err != nil {
			return err
		}
		exp, depth = max(exp, b.nodes[m].expansion), max(depth, b.nodes[m].depth)
	}
	b.groups[g].expansion, b.groups[g].depth, b.groups[g].state = exp, depth, 2
	return nil
}

// capped keeps a count from overflowing once it is past every limit.
func capped(n int64) int64 { return min(n, MaxInPlaceSubschemas+1) }

// inPlace calls f with each subschema that s applies to the same value.
// Dynamic references are apart (schemaBound.link).
func inPlace(s *jsonschema.Schema, f func(*jsonschema.Schema)) {
	for _, c := range []*jsonschema.Schema{s.Ref, s.Not, s.If, s.Then, s.Else} {
		if c != nil {
			f(c)
		}
	}
	for _, list := range [][]*jsonschema.Schema{s.AllOf, s.AnyOf, s.OneOf} {
		for _, c := range list {
			f(c)
		}
	}
	for _, k := range sortedKeys(s.DependentSchemas) {
		f(s.DependentSchemas[k])
	}
	for _, k := range sortedKeys(s.Dependencies) {
		if c, ok := s.Dependencies[k].(*jsonschema.Schema); ok {
			f(c)
		}
	}
}

// descending calls f with each subschema that s applies to a part of the
// value: a property, a property's name, an item.
func descending(s *jsonschema.Schema, f func(*jsonschema.Schema)) {
	for _, k := range sortedKeys(s.Properties) {
		f(s.Properties[k])
	}
	for _, re := range sortedPatterns(s.PatternProperties) {
		f(s.PatternProperties[re])
	}
	for _, c := range []*jsonschema.Schema{s.PropertyNames, s.UnevaluatedProperties, s.Contains,
		s.Items2020, s.UnevaluatedItems, s.ContentSchema} {
		if c != nil {
			f(c)
		}
	}
	for _, a := range []any{s.AdditionalProperties, s.Items, s.AdditionalItems} {
		switch a := a.(type) {
		case *jsonschema.Schema:
			f(a)
		case []*jsonschema.Schema:
			for _, c := range a {
				f(c)
			}
		}
	}
	for _, c := range s.PrefixItems {
		f(c)
	}
}

// where names a subschema by its place in the schema, without the URL
// the compiler gave the document.
func where(s *jsonschema.Schema) string {
	loc := strings.TrimPrefix(s.Location, schemaURL)
	if loc == "#" || loc == "" {
		return "the schema"
	}
	return "the subschema at " + loc
}

// patternEngine compiles the regular expressions of one schema, refusing
// one whose program exceeds MaxPatternSize or that together exceed
// MaxSchemaPatternSize. After compiling, the validator calls it for
// strings checked as "format": "regex"; by then the schema's total no
// longer counts (sealed is set before the schema is shared).
type patternEngine struct {
	total   int
	sealed  bool
	refused error // the first limit a pattern broke while compiling
}

// errPatternTooLarge is a regular expression over MaxPatternSize,
// errPatternsTooLarge a schema's over MaxSchemaPatternSize.
var (
	errPatternTooLarge  = fmt.Errorf("a regular expression compiles to more than %d instructions (tool.MaxPatternSize)", MaxPatternSize)
	errPatternsTooLarge = fmt.Errorf("the regular expressions compile to more than %d instructions together (tool.MaxSchemaPatternSize)", MaxSchemaPatternSize)
)

func (e *patternEngine) compile(expr string) (jsonschema.Regexp, error) {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil, err
	}
	size := programSize(re)
	if size > MaxPatternSize {
		e.refuse(errPatternTooLarge)
		return nil, errPatternTooLarge
	}
	if !e.sealed {
		if e.total += size; e.total > MaxSchemaPatternSize {
			e.refuse(errPatternsTooLarge)
			return nil, errPatternsTooLarge
		}
	}
	rx, err := regexp.Compile(expr)
	if err != nil {
		return nil, err
	}
	return &pattern{Regexp: rx, size: int64(size)}, nil
}

func (e *patternEngine) refuse(err error) {
	if !e.sealed && e.refused == nil {
		e.refused = err
	}
}

// pattern is a compiled regular expression with its program's size,
// which its matches cost per byte.
type pattern struct {
	*regexp.Regexp
	size int64
}

// programSize estimates the instructions regexp compiles re to, without
// expanding its repetitions (Go allows `x{1000}` nested up to a product
// of 1,000, so a short expression can compile to a large program).
func programSize(re *syntax.Regexp) int {
	const most = MaxPatternSize + 1 // past this, the size no longer matters
	n := 0
	for _, sub := range re.Sub {
		n += programSize(sub)
	}
	switch re.Op {
	case syntax.OpLiteral:
		n += len(re.Rune)
	case syntax.OpCapture:
		n += 2
	case syntax.OpRepeat:
		// A copy of the sub-program per repetition, and a branch per
		// optional one.
		optional := re.Max - re.Min
		if re.Max < 0 {
			optional = 1
		}
		n = min(n, most)*re.Min + min(n+1, most)*optional
	default:
		n++ // a class, an anchor, a branch
	}
	return min(n, most)
}

// numberScale is a JSON number's digits plus the size of its exponent,
// saturating: its exact value takes about that many decimal digits.
func numberScale(num string) int64 {
	mant, exp, _ := strings.Cut(strings.ToLower(num), "e")
	n := int64(len(mant))
	exp = strings.TrimLeft(exp, "+-0")
	if len(exp) > 12 {
		return 1 << 40
	}
	var e int64
	for _, d := range exp {
		e = e*10 + int64(d-'0')
	}
	return min(n+e, 1<<40)
}

// sortedKeys and sortedPatterns give a map's subschemas a fixed order, so
// that the same schema is numbered, and refused, the same way each time.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

func sortedPatterns(m map[jsonschema.Regexp]*jsonschema.Schema) []jsonschema.Regexp {
	return slices.SortedFunc(maps.Keys(m), func(a, b jsonschema.Regexp) int {
		return strings.Compare(a.String(), b.String())
	})
}
