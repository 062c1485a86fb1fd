package config

import (
	"fmt"
	"strings"
)

// Error is one problem in a configuration file, at a line and column of
// it, in the field Field (a dotted path such as "models.gpt.base_url").
// Messages never repeat the value of a field that may hold a secret.
type Error struct {
	File   string
	Line   int // 1-based; 0 when the problem has no place in the file
	Column int
	Field  string // empty for the file as a whole
	Msg    string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", e.Line, e.Column)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in a file, in file order. errors.As
// finds the first *Error in it.
type Errors []*Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the problems, for errors.As and errors.Is.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}
