package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"runtime/debug"
	"strings"
	"time"

	"github.com/invopop/jsonschema"

	"github.com/keelrun/keel"
)

// Option sets a trait of a tool made with New or Func.
type Option func(*traitOptions)

type traitOptions struct {
	detached bool
	timeout  time.Duration
}

// Detached makes the tool run detached: the run goes on while the call
// runs, and its result enters history when it completes.
func Detached() Option { return func(o *traitOptions) { o.detached = true } }

// WithTimeout sets the call's start-to-close timeout (default
// DefaultTimeout).
func WithTimeout(d time.Duration) Option { return func(o *traitOptions) { o.timeout = d } }

// ArgumentError says a call's arguments are unusable: not JSON, not
// matching the tool's schema, or not decodable into its argument type. Its
// message names every problem, because the model reads it to fix the call.
type ArgumentError struct {
	Tool     string
	Problems []string
}

func (e *ArgumentError) Error() string {
	msg := fmt.Sprintf("invalid arguments for tool %q", e.Tool)
	if len(e.Problems) > 0 {
		msg += ": " + strings.Join(e.Problems, "; ")
	}
	return msg
}

// Result returns e as an error result for the model.
func (e *ArgumentError) Result() Result { return Result{Output: e.Error(), IsError: true} }

// Failure is a final error meant for the model: New turns it into an
// error result (IsError) itself, so it never reaches the runner as a failed
// attempt. Use it for failures a retry cannot fix: a missing file, a
// refused path, a bad combination of arguments. (Today's runner also turns
// other errors into error results; Failure keeps that true whatever retry
// policy a runner applies.)
type Failure struct {
	Message string
}

func (e *Failure) Error() string { return e.Message }

// Failf returns a *Failure with a formatted message.
func Failf(format string, a ...any) error {
	return &Failure{Message: fmt.Sprintf(format, a...)}
}

// PanicError is a panic in a tool, recovered so that it fails the call
// instead of the worker. Its message, which the model may see, holds the
// panic value only; Stack is for logs.
type PanicError struct {
	Tool  string
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("tool %q panicked: %v", e.Tool, e.Value) }

// namePattern is the tool-name syntax the providers accept (OpenAI's is
// the strictest).
var namePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// New returns a tool that decodes its arguments into Args and calls fn.
// The JSON Schema of the arguments is derived from Args, which must be a
// struct (or a pointer to one): every exported field is a property, named
// by its json tag; fields without omitempty are required; the jsonschema
// tag adds keywords (`jsonschema:"description=...,enum=a,enum=b,minimum=1"`).
// The schema is self-contained (no $ref) and closed
// (additionalProperties: false).
//
// Arguments are validated against the schema before fn runs; invalid ones
// produce an error result naming each problem (so the model can fix its
// call) and fn is not called. Empty arguments and null count as {}. A
// *Failure or *ArgumentError from fn becomes an error result; any other
// error is returned from Call unchanged (so a *NeedInput from Ask reaches
// the runner), and a panic in fn becomes a *PanicError.
//
// New panics if name is not a valid tool name (letters, digits, _ and -, at
// most 64) or Args has no object schema (not a struct, or a recursive
// type): both are programming errors, found when the worker starts.
func New[Args any](name, description string, fn func(ctx context.Context, args Args) (string, error), opts ...Option) Tool {
	schema, err := schemaFor(reflect.TypeFor[Args]())
	if err != nil {
		panic(fmt.Sprintf("tool.New(%q): %v", name, err))
	}
	call := func(ctx context.Context, raw json.RawMessage) (Result, error) {
		var args Args
		if err := json.Unmarshal(raw, &args); err != nil {
			return (&ArgumentError{Tool: name, Problems: []string{decodeProblem(err)}}).Result(), nil
		}
		out, err := fn(ctx, args)
		if err != nil {
			var f *Failure
			var a *ArgumentError
			switch {
			case errors.As(err, &a):
				return a.Result(), nil
			case errors.As(err, &f):
				return Result{Output: f.Message, IsError: true}, nil
			}
			return Result{}, err
		}
		return Result{Output: out}, nil
	}
	return newFuncTool(keel.ToolSpec{Name: name, Description: description, Parameters: schema}, call, opts)
}

// noParameters is the schema of a tool without arguments.
var noParameters = json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)

// Func returns a tool with a hand-written JSON Schema and a handler that
// receives the raw arguments. As with New, arguments are validated against
// schema before fn runs, empty arguments count as {}, and a panic in fn
// becomes an error. A nil schema means the tool takes no arguments. Func
// panics on an invalid name or schema.
func Func(name, description string, schema json.RawMessage, fn func(ctx context.Context, args json.RawMessage) (Result, error), opts ...Option) Tool {
	if len(bytes.TrimSpace(schema)) == 0 {
		schema = noParameters
	}
	if err := CheckSchema(schema); err != nil {
		panic(fmt.Sprintf("tool.Func(%q): %v", name, err))
	}
	return newFuncTool(keel.ToolSpec{Name: name, Description: description, Parameters: schema}, fn, opts)
}

func newFuncTool(spec keel.ToolSpec, call func(context.Context, json.RawMessage) (Result, error), opts []Option) *funcTool {
	if !namePattern.MatchString(spec.Name) {
		panic(fmt.Sprintf("tool: invalid tool name %q: use 1 to 64 letters, digits, _ or -", spec.Name))
	}
	t := &funcTool{spec: spec, call: call}
	for _, o := range opts {
		o(&t.opts)
	}
	return t
}

type funcTool struct {
	spec keel.ToolSpec
	call func(context.Context, json.RawMessage) (Result, error)
	opts traitOptions
}

var (
	_ Detacher  = (*funcTool)(nil)
	_ Timeouter = (*funcTool)(nil)
)

func (t *funcTool) Spec() keel.ToolSpec { return t.spec }

func (t *funcTool) Detached() bool { return t.opts.detached }

func (t *funcTool) Timeout() time.Duration { return t.opts.timeout }

func (t *funcTool) Call(ctx context.Context, args json.RawMessage) (res Result, err error) {
	args = normalizeArgs(args)
	if err := ValidateJSON(t.spec.Parameters, args); err != nil {
		return argumentError(t.spec.Name, err).Result(), nil
	}
	defer func() {
		// A panicking tool must not take the worker down with it.
		if r := recover(); r != nil {
			res, err = Result{}, &PanicError{Tool: t.spec.Name, Value: r, Stack: debug.Stack()}
		}
	}()
	return t.call(ctx, args)
}

// normalizeArgs maps the empty arguments some models send for tools
// without parameters to {}.
func normalizeArgs(args json.RawMessage) json.RawMessage {
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return json.RawMessage("{}")
	}
	return args
}

// argumentError returns err as an *ArgumentError of the named tool.
func argumentError(name string, err error) *ArgumentError {
	var aerr *ArgumentError
	var verr *InvalidValueError
	if errors.As(err, &aerr) {
		return aerr
	}
	if errors.As(err, &verr) {
		return &ArgumentError{Tool: name, Problems: verr.Problems}
	}
	return &ArgumentError{Tool: name, Problems: []string{err.Error()}}
}

func decodeProblem(err error) string {
	var terr *json.UnmarshalTypeError
	if errors.As(err, &terr) && terr.Field != "" {
		return fmt.Sprintf("at /%s: cannot use %s as %s", terr.Field, terr.Value, terr.Type)
	}
	return err.Error()
}

// schemaFor derives the argument schema of a typed tool.
func schemaFor(t reflect.Type) (json.RawMessage, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("arguments must be a struct, not %s", t)
	}
	if recursive(t, map[reflect.Type]bool{}) {
		return nil, fmt.Errorf("argument type %s is recursive; tool schemas must be self-contained", t)
	}
	r := jsonschema.Reflector{
		Anonymous:      true, // no $id: providers neither need nor accept it
		DoNotReference: true, // inline nested types: no $ref or $defs
		ExpandedStruct: true,
	}
	s := r.ReflectFromType(t)
	s.Version = "" // no $schema keyword; some providers reject it
	if s.Type != "object" {
		return nil, fmt.Errorf("arguments type %s does not derive an object schema", t)
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encode schema: %w", err)
	}
	if err := CheckSchema(b); err != nil {
		return nil, err
	}
	return b, nil
}

// recursive reports whether t contains itself, which an inlined schema
// cannot express (the reflector would recurse forever).
func recursive(t reflect.Type, onPath map[reflect.Type]bool) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
		return recursive(t.Elem(), onPath)
	case reflect.Struct:
		if onPath[t] {
			return true
		}
		onPath[t] = true
		defer delete(onPath, t)
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() || f.Anonymous {
				if recursive(f.Type, onPath) {
					return true
				}
			}
		}
	}
	return false
}
