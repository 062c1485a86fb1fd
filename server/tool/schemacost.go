package tool

import (
	"encoding/json"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The estimate of a check's work, in units of about a nanosecond of
// jsonschema's validator on the machine of BenchmarkValidateJSONWorstCases,
// which prints nanoseconds per unit for the costliest shapes it knows (all
// below 1: the estimate is an upper bound). An evaluation is one subschema
// applied at one place of the value.
const (
	workEvaluation = 2500 // an evaluation: its allocations, garbage, error
	workChain      = 4    // per in-place subschema walked back, looking for a cycle
	workLevel      = 80   // per level of nesting: an error's location, copied, sorted, printed
	workEntry      = 100  // per property or item visited
	workUneval     = 500  // per property or item copied to track what was evaluated
	workMatch      = 600  // per match of a pattern
	workPatternOp  = 1    // per byte matched per instruction of a pattern
	workByte       = 1    // per byte of a string compared or counted
	workQuoteByte  = 20   // per byte of a string quoted in a problem
	workFormatByte = 60   // per byte of a string checked against a format, and quoted
	workNumber     = 800  // an exact rational of a short number
)

// numberWork is the work of reading a number as an exact rational
// (math/big), which grows with the square of its digits and exponent.
func numberWork(num string) int64 {
	n := numberScale(num)
	if n > 1<<20 {
		return MaxValidationWork + 1
	}
	return workNumber + n*n/64
}

// fixedWork fills in what one evaluation of n's subschema costs whatever
// the value, and what it does with a number.
func (n *boundNode) fixedWork(chain int64) {
	s := n.s
	n.fixed = workEvaluation + chain*workChain
	n.fixed += workEntry * int64(len(s.Required)+len(s.Dependencies)+len(s.DependentRequired)+len(s.DependentSchemas))
	for _, names := range s.DependentRequired {
		n.fixed += workEntry * int64(len(names))
	}
	var wanted []any
	if s.Enum != nil {
		wanted = s.Enum.Values
	}
	if s.Const != nil {
		wanted = append(wanted, *s.Const)
	}
	n.wanted = int64(len(wanted))
	for _, v := range wanted {
		// A problem shows every wanted value, and comparing with one
		// costs at most its size.
		n.fixed += 2 * valueWork(v)
		if _, ok := v.(json.Number); ok {
			n.numberOps++ // each comparison reads the number at hand
		}
	}
	if s.Types != nil {
		var number, integer bool
		for _, t := range s.Types.ToStrings() {
			number, integer = number || t == "number", integer || t == "integer"
		}
		if integer && !number {
			n.numberOps++ // is it whole?
		}
	}
	for _, set := range []bool{s.Minimum != nil, s.Maximum != nil, s.ExclusiveMinimum != nil, s.ExclusiveMaximum != nil, s.MultipleOf != nil} {
		if set {
			n.numberOps += 2 // read once, compared or divided
		}
	}
}

// valueWork is what walking a whole value costs: hashing it for
// uniqueItems, comparing it with another.
func valueWork(v any) int64 {
	switch v := v.(type) {
	case map[string]any:
		n := int64(workEntry)
		for k, c := range v {
			n += workEntry + workByte*int64(len(k)) + valueWork(c)
		}
		return n
	case []any:
		n := int64(workEntry)
		for _, c := range v {
			n += workEntry + valueWork(c)
		}
		return n
	case string:
		return workEntry + workByte*int64(len(v))
	case json.Number:
		return numberWork(string(v))
	}
	return workEntry
}

// costWalk estimates the work of checking one value, as an upper bound of
// what jsonschema's validator does: every subschema it may apply, at every
// place it may apply it, whether or not an earlier one decided. Each pair
// of subschema and place is estimated once (memo) and counted as often as
// the validator may reach it, so the walk itself stays small however the
// counts multiply.
type costWalk struct {
	b      *schemaBound
	places []place
	memo   map[uint64]int64
	// pairs bounds the walk's own work, since a dynamic reference's
	// candidates are all estimated though only the costliest counts.
	pairs int
	over  bool
}

// place is a part of the value. A container's parts get places together,
// in a row, when first reached; an object's keys get theirs when a
// propertyNames needs them.
type place struct {
	v     any
	depth int32
	parts int32    // the first part's place; 0 until expanded
	names int32    // the first key's place; 0 until needed
	keys  []string // an object's, in the order of its parts and names
	size  int64    // valueWork, 0 until needed
}

// work estimates the work of checking doc against b's schema, and reports
// whether it is within MaxValidationWork (past it, the estimate stops).
func (b *schemaBound) work(doc any) (int64, bool) {
	w := &costWalk{b: b, memo: map[uint64]int64{}, places: []place{{v: doc}}}
	total := w.cost(0, 0)
	return total, !w.over
}

// add adds n to total, noting when the budget is spent. Costs only grow,
// so once a part is over budget, so is the whole.
func (w *costWalk) add(total *int64, n int64) {
	if *total += n; *total > MaxValidationWork {
		w.over = true
	}
}

// cost is the work of evaluating the subschema numbered node at a place.
func (w *costWalk) cost(node, at int32) int64 {
	key := uint64(node)<<32 | uint64(at)
	if c, ok := w.memo[key]; ok {
		return c
	}
	if w.pairs++; w.pairs > MaxValidationWork/workEvaluation {
		w.over = true
	}
	n := &w.b.nodes[node]
	var total int64
	w.add(&total, w.own(n, at))
	for _, c := range n.inPlace {
		if w.over {
			return total
		}
		w.add(&total, w.cost(c, at))
	}
	for _, e := range n.dynamic {
		most := w.cost(e.target, at)
		if e.group >= 0 {
			for _, m := range w.b.groups[e.group].members {
				if w.over {
					return total
				}
				most = max(most, w.cost(m, at))
			}
		}
		w.add(&total, most)
	}
	if !w.over {
		w.descend(n.s, at, &total)
	}
	w.memo[key] = total
	return total
}

// descend adds the work of the subschemas s applies to the parts of the
// value at a place.
func (w *costWalk) descend(s *jsonschema.Schema, at int32, total *int64) {
	switch v := w.places[at].v.(type) {
	case map[string]any:
		w.expand(at)
		for i, k := range w.places[at].keys {
			matched := false
			if c, ok := s.Properties[k]; ok {
				matched = true
				w.child(c, at, i, total)
			}
			for re, c := range s.PatternProperties {
				if re.MatchString(k) {
					matched = true
					w.child(c, at, i, total)
				}
			}
			if c, ok := s.AdditionalProperties.(*jsonschema.Schema); ok && !matched {
				w.child(c, at, i, total)
			}
			if s.UnevaluatedProperties != nil {
				w.child(s.UnevaluatedProperties, at, i, total)
			}
			if s.PropertyNames != nil && !w.over {
				w.add(total, w.cost(w.b.index[s.PropertyNames], w.name(at, i)))
			}
		}
	case []any:
		w.expand(at)
		prefix, rest := s.PrefixItems, s.Items2020
		switch items := s.Items.(type) { // before draft 2020-12
		case []*jsonschema.Schema:
			prefix = items
			rest, _ = s.AdditionalItems.(*jsonschema.Schema)
		case *jsonschema.Schema:
			rest = items
		}
		for i := range v {
			if i < len(prefix) {
				w.child(prefix[i], at, i, total)
			} else if rest != nil {
				w.child(rest, at, i, total)
			}
			if s.Contains != nil {
				w.child(s.Contains, at, i, total)
			}
			if s.UnevaluatedItems != nil {
				w.child(s.UnevaluatedItems, at, i, total)
			}
		}
	}
}

// child adds the work of subschema s at part i of the place at.
func (w *costWalk) child(s *jsonschema.Schema, at int32, i int, total *int64) {
	if !w.over {
		w.add(total, w.cost(w.b.index[s], w.places[at].parts+int32(i)))
	}
}

// name is the place of an object's key i, for propertyNames.
func (w *costWalk) name(at int32, i int) int32 {
	if w.places[at].names == 0 {
		first, depth := int32(len(w.places)), w.places[at].depth+1
		for _, k := range w.places[at].keys {
			w.places = append(w.places, place{v: k, depth: depth})
		}
		w.places[at].names = first
	}
	return w.places[at].names + int32(i)
}

// expand gives the parts of a container their places.
func (w *costWalk) expand(at int32) {
	p := &w.places[at]
	if p.parts != 0 {
		return
	}
	first, depth := int32(len(w.places)), p.depth+1
	switch v := p.v.(type) {
	case map[string]any:
		p.keys = make([]string, 0, len(v))
		for k := range v {
			p.keys = append(p.keys, k)
		}
		for _, k := range w.places[at].keys {
			w.places = append(w.places, place{v: v[k], depth: depth})
		}
	case []any:
		for _, item := range v {
			w.places = append(w.places, place{v: item, depth: depth})
		}
	}
	w.places[at].parts = first
}

// size is valueWork of the value at a place, computed once.
func (w *costWalk) size(at int32) int64 {
	if w.places[at].size == 0 {
		w.places[at].size = min(valueWork(w.places[at].v), MaxValidationWork+1)
	}
	return w.places[at].size
}

// own is the work of one evaluation of n's subschema at a place, without
// its subschemas.
func (w *costWalk) own(n *boundNode, at int32) int64 {
	s := n.s
	work := n.fixed + int64(w.places[at].depth)*workLevel
	switch v := w.places[at].v.(type) {
	case map[string]any:
		// Every property is looked up and matched against every pattern.
		work += int64(len(v)) * (workEntry + workMatch*int64(len(s.PatternProperties)))
		for re := range s.PatternProperties {
			for k := range v {
				work += workPatternOp * patternSize(re) * int64(len(k)+1)
			}
		}
		if n.uneval {
			work += workUneval * int64(len(v))
		}
		if n.wanted > 0 {
			work += w.size(at) * n.wanted
		}
	case []any:
		if s.Items != nil || s.Items2020 != nil || s.Contains != nil || s.UnevaluatedItems != nil {
			work += workEntry * int64(len(v)) // items are visited
		}
		if n.uneval {
			work += workUneval * int64(len(v))
		}
		if s.UniqueItems {
			// Up to 20 items are compared in pairs, more are hashed.
			work += w.size(at) * min(max(int64(len(v)), 2), 20)
		}
		if n.wanted > 0 {
			work += w.size(at) * n.wanted
		}
	case string:
		l := int64(len(v)) + 1
		work += workByte * l * n.wanted // compared with each wanted value
		if s.MinLength != nil || s.MaxLength != nil {
			work += workByte * l // its runes counted
		}
		if s.Pattern != nil {
			// Matched, and quoted in the problem if it does not match.
			work += workMatch + (workPatternOp*patternSize(s.Pattern)+workQuoteByte)*l
		}
		if s.Format != nil {
			work += workFormatByte * l
			if s.Format.Name == "regex" {
				work += workFormatByte * MaxPatternSize // compiling it
			}
		}
	case json.Number:
		if n.numberOps > 0 {
			work += n.numberOps * numberWork(string(v))
		}
	}
	return min(work, MaxValidationWork+1)
}

// patternSize is the size of a compiled pattern's program; one not
// compiled by patternEngine counts as the largest allowed.
func patternSize(re jsonschema.Regexp) int64 {
	if p, ok := re.(*pattern); ok {
		return p.size
	}
	return MaxPatternSize
}
