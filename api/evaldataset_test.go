package api_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
)

// A dataset is hostile input (docs/contract.md §24): every line that is
// too large, malformed, or names a file or a URL for the worker to open
// is refused with a typed error naming its line, and nothing is read.
func TestReadDatasetRefusesHostileLines(t *testing.T) {
	ok := `{"prompt":"hi"}` + "\n"
	many := strings.Repeat(ok, api.MaxEvalCases+1)
	tests := []struct {
		name, data string
		line       int
		code       keel.Code
	}{
		{"huge line", `{"prompt":"` + strings.Repeat("x", api.MaxDatasetLineBytes) + `"}`, 1, keel.CodeTooLarge},
		{"huge prompt", `{"prompt":"` + strings.Repeat("x", api.MaxPromptBytes+1) + `"}`, 1, keel.CodeTooLarge},
		{"not JSON", ok + "{prompt: hi}\n", 2, keel.CodeInvalidInput},
		{"two values", `{"prompt":"a"} {"prompt":"b"}`, 1, keel.CodeInvalidInput},
		{"a path to read", `{"prompt":"hi","path":"/etc/passwd"}`, 1, keel.CodeInvalidInput},
		{"an attachment by path", `{"prompt":"hi","attachments":[{"path":"/etc/passwd","media_type":"image/png","kind":"image"}]}`, 1, keel.CodeInvalidInput},
		{"an attachment by URL", `{"prompt":"hi","attachments":[{"kind":"image","media_type":"image/png","key":"http://169.254.169.254/x","size":10,"bytes":10}]}`, 1, keel.CodeInvalidInput},
		{"a recorded run", `{"prompt":"hi","from":{"session":"s","run":1}}`, 1, keel.CodeInvalidInput},
		{"empty prompt", `{"prompt":"  "}`, 1, keel.CodeInvalidInput},
		{"bad regex", `{"prompt":"hi","expect":{"regex":"("}}`, 1, keel.CodeInvalidInput},
		{"schema not an object", `{"prompt":"hi","expect":{"schema":[1]}}`, 1, keel.CodeInvalidInput},
		{"too many strings", `{"prompt":"hi","expect":{"contains":[` + strings.Repeat(`"a",`, api.MaxEvalExpectations) + `"a"]}}`, 1, keel.CodeTooLarge},
		{"duplicate ID", `{"id":"a","prompt":"x"}` + "\n" + `{"id":"a","prompt":"y"}`, 2, keel.CodeInvalidInput},
		{"control bytes in an ID", `{"id":"a\u001b[2J","prompt":"x"}`, 1, keel.CodeInvalidInput},
		{"too many cases", many, api.MaxEvalCases + 1, keel.CodeTooLarge},
		{"too many lines", strings.Repeat("\n", api.MaxDatasetLines+1), api.MaxDatasetLines + 1, keel.CodeTooLarge},
		{"no cases", "\n\n", 0, keel.CodeInvalidInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cases, err := api.ReadDataset(strings.NewReader(tt.data))
			var de *api.DatasetError
			if !errors.As(err, &de) {
				t.Fatalf("err = %v, want a *api.DatasetError", err)
			}
			if cases != nil || de.Line != tt.line || de.Err.Code != tt.code {
				t.Fatalf("line %d code %s (%v), want line %d code %s", de.Line, de.Err.Code, err, tt.line, tt.code)
			}
			if !errors.Is(err, keel.ErrInvalidInput) {
				t.Fatalf("errors.Is(%v, keel.ErrInvalidInput) = false", err)
			}
		})
	}
}

func TestReadDatasetNamesCasesByLine(t *testing.T) {
	cases, err := api.ReadDataset(strings.NewReader(`{"prompt":"a"}` + "\n\n" + `{"id":"b","prompt":"b","expect":{"contains":["b"]}}` + "\r\n" + `{"prompt":"c"}`))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range cases {
		ids = append(ids, c.ID)
	}
	if got := strings.Join(ids, ","); got != "line-1,b,line-4" {
		t.Fatalf("IDs %s", got)
	}
}
