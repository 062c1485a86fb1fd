package wiregen

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Both clients' declarations are made from the annotated schemas, so they
// say what the document says: a field is optional where the schema does
// not require it, and its comment is its description.

// tsOwn are schemas the TypeScript client declares by hand: its Envelope
// is generic over the event's type and data, which the schema cannot say.
var tsOwn = []string{"Envelope"}

// clientNames are the names the clients give schemas with no schema
// name of their own: enums (Approval, SessionState), a TypeScript Usage,
// inline objects (by their Go type or title). Set by schemas().
var clientNames = map[*Ordered]string{}

var wordRE = regexp.MustCompile(`[a-zA-Z0-9]+`)

func camel(s string) string {
	var b strings.Builder
	for _, w := range wordRE.FindAllString(s, -1) {
		b.WriteString(strings.ToUpper(w[:1]) + w[1:])
	}
	return b.String()
}

func str(s *Ordered, k string) string { v, _ := s.Get(k); x, _ := v.(string); return x }

func required(s *Ordered) []string {
	v, _ := s.Get("required")
	var out []string
	switch r := v.(type) {
	case []string:
		out = r
	case []any:
		for _, x := range r {
			out = append(out, x.(string))
		}
	}
	return out
}

func enumValues(s *Ordered) []string {
	v, ok := s.Get("enum")
	if !ok {
		return nil
	}
	var out []string
	switch e := v.(type) {
	case []string:
		out = e
	case []any:
		for _, x := range e {
			out = append(out, fmt.Sprint(x))
		}
	}
	return out
}

func refName(s *Ordered) string {
	r := str(s, "$ref")
	if r == "" {
		return ""
	}
	return r[strings.LastIndex(r, "/")+1:]
}

// comment wraps text at 80 columns, each line prefixed.
func comment(text, prefix string, width int) []string {
	var lines []string
	line := prefix
	for _, w := range strings.Fields(text) {
		if len(line) > len(prefix) && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = prefix
		}
		if len(line) > len(prefix) {
			line += " "
		}
		line += w
	}
	return append(lines, line)
}

func typeScript(schemas *Ordered) (string, error) {
	var b strings.Builder
	for _, name := range schemas.Keys() {
		if slices.Contains(tsOwn, name) {
			continue
		}
		s := schemas.Obj(name)
		b.WriteString("\n")
		tsDoc(&b, str(s, "description"), "")
		fmt.Fprintf(&b, "export interface %s {\n", name)
		if err := tsFields(&b, s, "  "); err != nil {
			return "", fmt.Errorf("%s: %w", name, err)
		}
		b.WriteString("}\n")
	}
	b.WriteString("\n")
	return b.String(), nil
}

func tsDoc(b *strings.Builder, text, ind string) {
	if text == "" {
		return
	}
	if one := ind + "/** " + text + " */"; len(one) <= 100 {
		b.WriteString(one + "\n")
		return
	}
	b.WriteString(ind + "/**\n")
	for _, l := range comment(text, ind+" * ", 80) {
		b.WriteString(l + "\n")
	}
	b.WriteString(ind + " */\n")
}

func tsFields(b *strings.Builder, s *Ordered, ind string) error {
	props := s.Obj("properties")
	if props == nil {
		return nil
	}
	req := required(s)
	for _, k := range props.Keys() {
		p := props.Obj(k)
		tsDoc(b, str(p, "description"), ind)
		opt := "?"
		if slices.Contains(req, k) {
			opt = ""
		}
		t, err := tsType(p, ind)
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		fmt.Fprintf(b, "%s%s%s: %s;\n", ind, k, opt, t)
	}
	return nil
}

func tsType(s *Ordered, ind string) (string, error) {
	if n := refName(s); n != "" {
		return n, nil
	}
	if n := clientNames[s]; n != "" && (s.Obj("properties") == nil) {
		return n, nil
	}
	if e := enumValues(s); e != nil {
		var q []string
		for _, v := range e {
			q = append(q, fmt.Sprintf("%q", v))
		}
		return strings.Join(q, " | "), nil
	}
	switch str(s, "type") {
	case "string":
		return "string", nil
	case "integer", "number":
		return "number", nil
	case "boolean":
		return "boolean", nil
	case "array":
		items := s.Obj("items")
		if items == nil {
			return "unknown[]", nil
		}
		if items.Obj("properties") != nil {
			var b strings.Builder
			b.WriteString("Array<{\n")
			if err := tsFields(&b, items, ind+"  "); err != nil {
				return "", err
			}
			b.WriteString(ind + "}>")
			return b.String(), nil
		}
		t, err := tsType(items, ind)
		if err != nil {
			return "", err
		}
		if strings.Contains(t, "|") {
			return "Array<" + t + ">", nil
		}
		return t + "[]", nil
	case "object":
		if s.Obj("properties") != nil {
			var b strings.Builder
			b.WriteString("{\n")
			if err := tsFields(&b, s, ind+"  "); err != nil {
				return "", err
			}
			b.WriteString(ind + "}")
			return b.String(), nil
		}
		if ap := s.Obj("additionalProperties"); ap != nil {
			t, err := tsType(ap, ind)
			if err != nil {
				return "", err
			}
			return "Record<string, " + t + ">", nil
		}
		return "Record<string, unknown>", nil
	case "":
		return "unknown", nil
	}
	return "", fmt.Errorf("no TypeScript type for %v", s.Keys())
}

// python writes TypedDicts: a required field as its type, another as
// NotRequired; an inline object as a TypedDict of its own, before the
// schema that holds it.
func python(schemas *Ordered) (string, error) {
	var b strings.Builder
	for _, name := range schemas.Keys() {
		if err := pyClass(&b, name, schemas.Obj(name)); err != nil {
			return "", fmt.Errorf("%s: %w", name, err)
		}
	}
	b.WriteString("\n\n")
	return b.String(), nil
}

func pyClass(b *strings.Builder, name string, s *Ordered) error {
	props := s.Obj("properties")
	var nested []string
	var body strings.Builder
	if d := str(s, "description"); d != "" {
		lines := comment(d, "", 76)
		body.WriteString(`    """` + strings.Join(lines, "\n    ") + `"""` + "\n")
	}
	req := required(s)
	if props != nil {
		for _, k := range props.Keys() {
			p := props.Obj(k)
			t, err := pyType(p, name+camel(k), &nested, b)
			if err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
			if d := str(p, "description"); d != "" {
				for _, l := range comment(d, "    #: ", 80) {
					body.WriteString(l + "\n")
				}
			}
			if !slices.Contains(req, k) {
				t = "NotRequired[" + t + "]"
			}
			fmt.Fprintf(&body, "    %s: %s\n", k, t)
		}
	}
	if props == nil || len(props.Keys()) == 0 {
		body.WriteString("    pass\n")
	}
	fmt.Fprintf(b, "\n\nclass %s(TypedDict):\n%s", name, body.String())
	return nil
}

func pyType(s *Ordered, inlineName string, nested *[]string, b *strings.Builder) (string, error) {
	if n := refName(s); n != "" {
		return n, nil
	}
	if n := clientNames[s]; n != "" && s.Obj("properties") == nil && enumValues(s) != nil {
		return n, nil
	}
	if e := enumValues(s); e != nil {
		var q []string
		for _, v := range e {
			q = append(q, fmt.Sprintf("%q", v))
		}
		return "Literal[" + strings.Join(q, ", ") + "]", nil
	}
	switch str(s, "type") {
	case "string":
		return "str", nil
	case "integer":
		return "int", nil
	case "number":
		return "float", nil
	case "boolean":
		return "bool", nil
	case "array":
		items := s.Obj("items")
		if items == nil {
			return "List[Any]", nil
		}
		t, err := pyType(items, inlineName, nested, b)
		if err != nil {
			return "", err
		}
		return "List[" + t + "]", nil
	case "object":
		if s.Obj("properties") != nil {
			n := str(s, "title")
			if n == "" {
				n = clientNames[s]
			}
			if n == "" {
				n = inlineName
			}
			if err := pyClass(b, n, s); err != nil {
				return "", err
			}
			return n, nil
		}
		if ap := s.Obj("additionalProperties"); ap != nil {
			t, err := pyType(ap, inlineName, nested, b)
			if err != nil {
				return "", err
			}
			return "Dict[str, " + t + "]", nil
		}
		return "Dict[str, Any]", nil
	case "":
		return "Any", nil
	}
	return "", fmt.Errorf("no Python type for %v", s.Keys())
}
