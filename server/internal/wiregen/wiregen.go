package wiregen

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// annotations is what Go's types do not say about their JSON: each
// schema's and field's description, bounds, patterns and defaults. It is
// a JSON Merge Patch (RFC 7396) over the schemas made from the types, so a
// null removes what the types gave (a field the wire does not carry).
//
//go:embed annotations.json
var annotations []byte

// The generated files, from the repository's root.
const (
	OpenAPIPath    = "server/gateway/openapi.json"
	TypeScriptPath = "clients/typescript/index.d.ts"
	PythonPath     = "clients/python/keel_client/types.py"
)

// Command is how to regenerate the files, for messages.
const Command = "cd server && go generate ./gateway"

// A File is a generated file: its path from the repository's root and
// its contents.
type File struct {
	Path string
	Data []byte
}

// FindRoot finds the repository's root from the working directory: the
// nearest directory up with a go.work.
func FindRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.work above the working directory; pass -root")
		}
		dir = parent
	}
}

// Schemas is components.schemas: the schemas made from Roots, annotated.
func Schemas() (*Ordered, error) {
	s, err := schemas()
	if err != nil {
		return nil, err
	}
	if err := ApplyAnnotations(s, annotations); err != nil {
		return nil, fmt.Errorf("annotations.json: %w", err)
	}
	return s, nil
}

// ApplyAnnotations merges a patch such as annotations.json into schemas.
func ApplyAnnotations(schemas *Ordered, patch []byte) error {
	var p Ordered
	if err := json.Unmarshal(patch, &p); err != nil {
		return err
	}
	return mergePatch(schemas, &p, "", false)
}

// RawSchemas is components.schemas as the types alone make it.
func RawSchemas() (*Ordered, error) { return schemas() }

// mergePatch applies patch to target (RFC 7396). A patch that names a
// schema or a property the types do not have is refused: an annotation
// that outlived its field.
func mergePatch(target, patch *Ordered, path string, created bool) error {
	for _, k := range patch.Keys() {
		v, _ := patch.Get(k)
		cur, exists := target.Get(k)
		switch pv := v.(type) {
		case nil:
			if !exists {
				return fmt.Errorf("%s%s: removes what is not there", path, k)
			}
			target.Delete(k)
		case *Ordered:
			co, ok := cur.(*Ordered)
			made := created
			if !ok {
				if !created && (path == "" || strings.HasSuffix(path, "properties.")) {
					return fmt.Errorf("%s%s: no such schema or field", path, k)
				}
				co, made = NewOrdered(), true
				target.Set(k, co)
			}
			if err := mergePatch(co, pv, path+k+".", made); err != nil {
				return err
			}
		default:
			target.Set(k, v)
		}
	}
	return nil
}

// Generate makes the generated files from the types and the files'
// hand-written parts, read under root.
func Generate(root string) ([]File, error) {
	schemas, err := Schemas()
	if err != nil {
		return nil, err
	}
	var out []File
	doc, err := os.ReadFile(filepath.Join(root, OpenAPIPath))
	if err != nil {
		return nil, err
	}
	api, err := openAPI(doc, schemas)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", OpenAPIPath, err)
	}
	out = append(out, File{OpenAPIPath, api})
	for _, g := range []struct {
		path string
		gen  func(*Ordered) (string, error)
		mark string
	}{
		{TypeScriptPath, typeScript, "//"},
		{PythonPath, python, "#"},
	} {
		old, err := os.ReadFile(filepath.Join(root, g.path))
		if err != nil {
			return nil, err
		}
		body, err := g.gen(schemas)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", g.path, err)
		}
		data, err := splice(string(old), body, g.mark)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", g.path, err)
		}
		out = append(out, File{g.path, []byte(data)})
	}
	return out, nil
}

// OpenAPI is doc with its components.schemas generated.
func OpenAPI(doc []byte) ([]byte, error) {
	schemas, err := Schemas()
	if err != nil {
		return nil, err
	}
	return openAPI(doc, schemas)
}

// openAPI replaces a document's components.schemas, keeping the rest as
// written.
func openAPI(doc []byte, schemas *Ordered) ([]byte, error) {
	var d Ordered
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, err
	}
	comp := d.Obj("components")
	if comp == nil {
		return nil, errors.New("no components")
	}
	comp.Set("schemas", schemas)
	if err := checkRefs(&d, &d, ""); err != nil {
		return nil, err
	}
	return indent(&d)
}

// checkRefs fails on a $ref of the document to a component it lacks: a
// hand-written path naming a schema no Go type makes any more.
func checkRefs(doc *Ordered, v any, path string) error {
	switch x := v.(type) {
	case *Ordered:
		for _, k := range x.Keys() {
			c, _ := x.Get(k)
			if r, ok := c.(string); ok && k == "$ref" {
				parts := strings.Split(strings.TrimPrefix(r, "#/"), "/")
				if len(parts) != 3 || parts[0] != "components" || doc.Obj("components").Obj(parts[1]) == nil ||
					doc.Obj("components").Obj(parts[1]).Obj(parts[2]) == nil {
					return fmt.Errorf("%s: $ref %s names nothing in the document", path, r)
				}
				continue
			}
			if err := checkRefs(doc, c, path+"/"+k); err != nil {
				return err
			}
		}
	case []any:
		for i, c := range x {
			if err := checkRefs(doc, c, fmt.Sprintf("%s/%d", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// The markers around a file's generated section.
const (
	beginMark = " BEGIN GENERATED by server/internal/wiregen from the Go wire types; do not edit (" + Command + ")."
	endMark   = " END GENERATED"
)

// splice puts body between the file's markers.
func splice(old, body, comment string) (string, error) {
	begin, end := comment+beginMark+"\n", comment+endMark+"\n"
	i := strings.Index(old, begin)
	j := strings.Index(old, end)
	if i < 0 || j < i {
		return "", fmt.Errorf("no %q ... %q section", strings.TrimSpace(begin), strings.TrimSpace(end))
	}
	return old[:i] + begin + body + old[j:], nil
}
