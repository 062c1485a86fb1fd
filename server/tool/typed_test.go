package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/keelrun/keel"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

type sampleArgs struct {
	Query   string         `json:"query" jsonschema:"description=What to search for."`
	Limit   int            `json:"limit,omitempty" jsonschema:"minimum=1,maximum=50"`
	Sort    string         `json:"sort,omitempty" jsonschema:"enum=relevance,enum=date"`
	Filters []sampleFilter `json:"filters,omitempty"`
	Since   *time.Time     `json:"since,omitempty"`
	Exact   bool           `json:"exact"`
	hidden  string
}

type sampleFilter struct {
	Field string   `json:"field"`
	Any   []string `json:"any" jsonschema:"minItems=1"`
}

func TestNewDerivesSchema(t *testing.T) {
	tl := New("search", "Search things.", func(context.Context, sampleArgs) (string, error) { return "", nil })
	spec := tl.Spec()
	if spec.Name != "search" || spec.Description != "Search things." {
		t.Errorf("spec name/description = %q/%q", spec.Name, spec.Description)
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, spec.Parameters, "", "  "); err != nil {
		t.Fatal(err)
	}
	pretty.WriteByte('\n')
	golden := filepath.Join("testdata", "sample_args.schema.json")
	if *update {
		if err := os.WriteFile(golden, pretty.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), pretty.String()); diff != "" {
		t.Errorf("schema (-want +got):\n%s", diff)
	}

	// What providers need, checked apart from the snapshot.
	var top map[string]any
	if err := json.Unmarshal(spec.Parameters, &top); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"$ref", "$defs", "$schema", "$id"} {
		if _, ok := top[k]; ok {
			t.Errorf("schema has top-level %q", k)
		}
	}
	if top["type"] != "object" || top["additionalProperties"] != false {
		t.Errorf("type = %v, additionalProperties = %v; want object, false", top["type"], top["additionalProperties"])
	}
	if strings.Contains(string(spec.Parameters), "$ref") {
		t.Error("schema refers to definitions; want every type inline")
	}
}

func TestNewValidatesArguments(t *testing.T) {
	tests := []struct {
		name string
		args string
		want Result
	}{
		{"valid", `{"query":"go","exact":true,"limit":3}`, Result{Output: "query=go limit=3 exact=true"}},
		{"missing required", `{"query":"go"}`,
			Result{Output: `invalid arguments for tool "search": missing property 'exact'`, IsError: true}},
		{"wrong type", `{"query":"go","exact":"yes"}`,
			Result{Output: `invalid arguments for tool "search": at /exact: got string, want boolean`, IsError: true}},
		{"out of range", `{"query":"go","exact":true,"limit":99}`,
			Result{Output: `invalid arguments for tool "search": at /limit: maximum: got 99, want 50`, IsError: true}},
		{"not in enum", `{"query":"go","exact":true,"sort":"name"}`,
			Result{Output: `invalid arguments for tool "search": at /sort: value must be one of 'relevance', 'date'`, IsError: true}},
		{"unknown property", `{"query":"go","exact":true,"page":2}`,
			Result{Output: `invalid arguments for tool "search": additional properties 'page' not allowed`, IsError: true}},
		{"nested", `{"query":"go","exact":true,"filters":[{"field":"lang","any":[]}]}`,
			Result{Output: `invalid arguments for tool "search": at /filters/0/any: minItems: got 0, want 1`, IsError: true}},
		{"several", `{"limit":0}`,
			Result{Output: `invalid arguments for tool "search": at /limit: minimum: got 0, want 1; missing properties 'query', 'exact'`, IsError: true}},
		{"not JSON", `{"query":`,
			Result{Output: `invalid arguments for tool "search": not valid JSON: unexpected EOF`, IsError: true}},
		{"not an object", `["go"]`,
			Result{Output: `invalid arguments for tool "search": got array, want object`, IsError: true}},
		{"empty means {}", ``,
			Result{Output: `invalid arguments for tool "search": missing properties 'query', 'exact'`, IsError: true}},
		{"bad date", `{"query":"go","exact":true,"since":"yesterday"}`,
			Result{Output: `invalid arguments for tool "search": at /since: 'yesterday' is not valid date-time: less than 20 characters long`, IsError: true}},
	}
	called := 0
	tl := New("search", "Search things.", func(_ context.Context, a sampleArgs) (string, error) {
		called++
		return "query=" + a.Query + " limit=" + jsonText(a.Limit) + " exact=" + jsonText(a.Exact), nil
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := called
			got, err := tl.Call(context.Background(), json.RawMessage(tt.args))
			if err != nil {
				t.Fatalf("Call error: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			if ran := called > before; ran == tt.want.IsError {
				t.Errorf("fn ran = %v for a call with IsError = %v", ran, tt.want.IsError)
			}
		})
	}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestNewErrors(t *testing.T) {
	boom := errors.New("connection refused")
	tests := []struct {
		name    string
		fn      func(context.Context, struct{}) (string, error)
		want    Result
		wantErr error // matched with errors.Is or, for *NeedInput, errors.As
	}{
		{"failure becomes an error result",
			func(context.Context, struct{}) (string, error) { return "", Failf("no such user %q", "ada") },
			Result{Output: `no such user "ada"`, IsError: true}, nil},
		{"argument error becomes an error result",
			func(context.Context, struct{}) (string, error) {
				return "", &ArgumentError{Tool: "t", Problems: []string{"from and to are swapped"}}
			},
			Result{Output: `invalid arguments for tool "t": from and to are swapped`, IsError: true}, nil},
		{"other errors pass through",
			func(context.Context, struct{}) (string, error) { return "", boom },
			Result{}, boom},
		{"need input passes through",
			func(ctx context.Context, _ struct{}) (string, error) {
				_, err := Ask(ctx, Question{ID: "ok", Prompt: "Proceed?"})
				return "", err
			},
			Result{}, &NeedInput{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := New("t", "", tt.fn).Call(context.Background(), json.RawMessage(`{}`))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			var need *NeedInput
			switch {
			case tt.wantErr == nil && err != nil:
				t.Errorf("error %v, want none", err)
			case errors.As(tt.wantErr, &need):
				if !errors.As(err, &need) || need.Question.ID != "ok" {
					t.Errorf("error %v, want *NeedInput for question ok", err)
				}
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Errorf("error %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestNewRecoversPanics(t *testing.T) {
	tl := New("crash", "", func(context.Context, struct{}) (string, error) { panic("index out of range") })
	_, err := tl.Call(context.Background(), nil)
	var perr *PanicError
	if !errors.As(err, &perr) {
		t.Fatalf("error %v, want *PanicError", err)
	}
	if diff := cmp.Diff(`tool "crash" panicked: index out of range`, err.Error()); diff != "" {
		t.Errorf("message (-want +got):\n%s", diff)
	}
	if !strings.Contains(string(perr.Stack), "TestNewRecoversPanics") {
		t.Errorf("stack does not show the panicking code:\n%s", perr.Stack)
	}
}

func TestNewTraits(t *testing.T) {
	fn := func(context.Context, struct{}) (string, error) { return "", nil }
	tests := []struct {
		name string
		tool Tool
		want Traits
	}{
		{"defaults", New("a", "", fn), Traits{Timeout: keel.Duration(DefaultTimeout)}},
		{"detached", New("a", "", fn, Detached()), Traits{Detached: true, Timeout: keel.Duration(DefaultTimeout)}},
		{"timeout", New("a", "", fn, WithTimeout(time.Hour)), Traits{Timeout: keel.Duration(time.Hour)}},
		{"both", New("a", "", fn, WithTimeout(time.Second), Detached()), Traits{Detached: true, Timeout: keel.Duration(time.Second)}},
		{"sleep", Sleep(), Traits{Timeout: keel.Duration(DefaultTimeout), Native: NativeSleep}},
		{"ask_user", AskUser(), Traits{Timeout: keel.Duration(DefaultTimeout), Native: NativeAskUser}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, TraitsOf(tt.tool)); diff != "" {
				t.Errorf("traits (-want +got):\n%s", diff)
			}
		})
	}
}

type node struct {
	Children []node `json:"children"`
}

func TestNewPanicsOnProgrammingErrors(t *testing.T) {
	tests := []struct {
		name string
		mk   func()
		want string
	}{
		{"bad name", func() { New("read file", "", func(context.Context, struct{}) (string, error) { return "", nil }) },
			`invalid tool name "read file"`},
		{"long name", func() {
			New(strings.Repeat("a", 65), "", func(context.Context, struct{}) (string, error) { return "", nil })
		}, "invalid tool name"},
		{"not a struct", func() { New("a", "", func(context.Context, string) (string, error) { return "", nil }) },
			"arguments must be a struct, not string"},
		{"map", func() { New("a", "", func(context.Context, map[string]any) (string, error) { return "", nil }) },
			"arguments must be a struct"},
		{"recursive", func() { New("a", "", func(context.Context, node) (string, error) { return "", nil }) },
			"is recursive"},
		{"bad raw schema", func() { Func("a", "", json.RawMessage(`{"type":1}`), nil) }, "invalid JSON Schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if msg, _ := r.(string); !strings.Contains(msg, tt.want) {
					t.Errorf("panic %v, want one containing %q", r, tt.want)
				}
			}()
			tt.mk()
		})
	}
}

func TestNewAcceptsPointerArgs(t *testing.T) {
	tl := New("p", "", func(_ context.Context, a *sampleFilter) (string, error) { return a.Field, nil })
	got, err := tl.Call(context.Background(), json.RawMessage(`{"field":"lang","any":["go"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Result{Output: "lang"}, got); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
}

func TestFunc(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false}`)
	tl := Func("double", "Doubles n.", schema, func(_ context.Context, args json.RawMessage) (Result, error) {
		var in struct{ N int }
		if err := json.Unmarshal(args, &in); err != nil {
			return Result{}, err
		}
		return Result{Output: jsonText(2 * in.N)}, nil
	}, Detached())
	tests := []struct {
		args string
		want Result
	}{
		{`{"n":21}`, Result{Output: "42"}},
		{`{"n":"21"}`, Result{Output: `invalid arguments for tool "double": at /n: got string, want integer`, IsError: true}},
		{`null`, Result{Output: `invalid arguments for tool "double": missing property 'n'`, IsError: true}},
	}
	for _, tt := range tests {
		got, err := tl.Call(context.Background(), json.RawMessage(tt.args))
		if err != nil {
			t.Fatalf("Call(%s) error: %v", tt.args, err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Call(%s) (-want +got):\n%s", tt.args, diff)
		}
	}
	if !TraitsOf(tl).Detached {
		t.Error("Detached option lost")
	}
	if diff := cmp.Diff(keel.ToolSpec{Name: "double", Description: "Doubles n.", Parameters: schema}, tl.Spec()); diff != "" {
		t.Errorf("spec (-want +got):\n%s", diff)
	}
}

// Values the schema accepts can still fail to decode into the Go type (an
// integer too large for the field); that too is an argument error.
func TestNewReportsDecodeErrors(t *testing.T) {
	type args struct {
		N uint8 `json:"n"`
	}
	tl := New("small", "", func(_ context.Context, a args) (string, error) { return jsonText(a.N), nil })
	got, err := tl.Call(context.Background(), json.RawMessage(`{"n":300}`))
	if err != nil {
		t.Fatal(err)
	}
	want := Result{Output: `invalid arguments for tool "small": at /n: cannot use number 300 as uint8`, IsError: true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
}

func TestFuncWithoutSchema(t *testing.T) {
	tl := Func("now", "The time.", nil, func(context.Context, json.RawMessage) (Result, error) { return Result{Output: "noon"}, nil })
	if diff := cmp.Diff(string(noParameters), string(tl.Spec().Parameters)); diff != "" {
		t.Errorf("schema (-want +got):\n%s", diff)
	}
	for _, args := range []string{``, `{}`} {
		got, err := tl.Call(context.Background(), json.RawMessage(args))
		if err != nil || got.Output != "noon" || got.IsError || got.Files != nil {
			t.Errorf("Call(%q) = %+v, %v", args, got, err)
		}
	}
	got, _ := tl.Call(context.Background(), json.RawMessage(`{"tz":"UTC"}`))
	if diff := cmp.Diff(fail(`invalid arguments for tool "now": additional properties 'tz' not allowed`), got); diff != "" {
		t.Errorf("unexpected argument (-want +got):\n%s", diff)
	}
}
