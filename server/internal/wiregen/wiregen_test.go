package wiregen_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keelrun/keel/server/internal/wiregen"
)

const root = "../../.."

// TestGeneratedFilesFresh regenerates the OpenAPI schemas and the clients'
// types in memory and fails when a file in the tree differs: a wire type
// changed and the files were not regenerated, or one was edited by hand.
func TestGeneratedFilesFresh(t *testing.T) {
	files, err := wiregen.Generate(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 {
		t.Fatalf("%d files generated", len(files))
	}
	for _, f := range files {
		old, err := os.ReadFile(filepath.Join(root, f.Path))
		if err != nil {
			t.Fatal(err)
		}
		if string(old) != string(f.Data) {
			t.Errorf("%s is stale: run `%s`", f.Path, wiregen.Command)
		}
	}
}

// An annotation that names a schema or a field the types do not have is
// refused, so one cannot outlive its field.
func TestAnnotationOfMissingFieldRefused(t *testing.T) {
	s, err := wiregen.RawSchemas()
	if err != nil {
		t.Fatal(err)
	}
	if s.Obj("RunRequest").Obj("properties").Obj("prompt") == nil {
		t.Fatal("RunRequest.prompt missing")
	}
	err = wiregen.ApplyAnnotations(s, []byte(`{"RunRequest": {"properties": {"no_such_field": {"description": "x"}}}}`))
	if err == nil || !strings.Contains(err.Error(), "no_such_field") {
		t.Fatalf("err %v", err)
	}
	err = wiregen.ApplyAnnotations(s, []byte(`{"NoSuchSchema": {"description": "x"}}`))
	if err == nil || !strings.Contains(err.Error(), "NoSuchSchema") {
		t.Fatalf("err %v", err)
	}
}

// Each generated file keeps its hand-written parts: the document's paths,
// the clients' own declarations.
func TestHandWrittenPartsKept(t *testing.T) {
	files, err := wiregen.Generate(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		for _, want := range map[string][]string{
			wiregen.OpenAPIPath:    {`"/v1/sessions/{id}/runs"`, `"securitySchemes"`, `"RunRequest"`},
			wiregen.TypeScriptPath: {"export declare class KeelClient", "export interface Envelope<T extends string", "export interface RunRequest {"},
			wiregen.PythonPath:     {"class Event:", "class RunRequest(TypedDict):"},
		}[f.Path] {
			if !strings.Contains(string(f.Data), want) {
				t.Errorf("%s lacks %q", f.Path, want)
			}
		}
	}
}

// A hand-written path's $ref to a schema the types do not make is an
// error, not a dangling reference in the served document.
func TestDanglingRefRefused(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(root, wiregen.OpenAPIPath))
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(doc), `"#/components/schemas/RunRequest"`, `"#/components/schemas/NoSuchRequest"`, 1)
	if bad == string(doc) {
		t.Fatal("openapi.json no longer refers to RunRequest")
	}
	_, err = wiregen.OpenAPI([]byte(bad))
	if err == nil || !strings.Contains(err.Error(), "NoSuchRequest") {
		t.Fatalf("err %v", err)
	}
}
