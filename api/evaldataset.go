package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/keelrun/keel"
)

// Limits of a dataset file (JSON Lines, one EvalCase a line).
const (
	// MaxDatasetLineBytes bounds one line: a prompt at MaxPromptBytes
	// and its expectations.
	MaxDatasetLineBytes = MaxPromptBytes + 64<<10
	// MaxDatasetLines bounds the lines of a dataset, blank ones too.
	MaxDatasetLines = 4 * MaxEvalCases
)

// DatasetError is a dataset line that ReadDataset refused: the line's
// number (from 1) and the keel error saying why, which errors.Is and
// errors.As reach (keel.ErrInvalidInput; keel.CodeTooLarge for a line or
// a dataset over its limits).
type DatasetError struct {
	Line int
	Err  *keel.Error
}

func (e *DatasetError) Error() string {
	return fmt.Sprintf("dataset line %d: %s", e.Line, e.Err.Message)
}

// Unwrap returns the keel error.
func (e *DatasetError) Unwrap() error { return e.Err }

// ReadDataset reads a dataset: JSON Lines, each line one EvalCase
// ({"id", "prompt", "attachments", "conversation", "expect"}), blank
// lines skipped. A
// case without an ID is named "line-N". It trusts nothing it reads: a
// line over MaxDatasetLineBytes, more than MaxEvalCases cases or
// MaxDatasetLines lines, a field EvalCase does not have (a "path" or
// "url" is never opened: attachments are content-store references, and
// a conversation's turns are a role and text), or a case that fails
// EvalCase.Validate is refused with a *DatasetError,
// and no case is returned. A dataset never sets a case's From.
func ReadDataset(r io.Reader) ([]EvalCase, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var cases []EvalCase
	seen := map[string]bool{}
	for n := 1; ; n++ {
		line, err := readLine(br, MaxDatasetLineBytes)
		if errors.Is(err, io.EOF) && line == nil {
			break
		}
		if n > MaxDatasetLines {
			return nil, &DatasetError{n, keel.Errorf(keel.CodeTooLarge, "a dataset has at most %d lines", MaxDatasetLines)}
		}
		if errors.Is(err, errLineTooLong) {
			return nil, &DatasetError{n, keel.Errorf(keel.CodeTooLarge, "over %d bytes", MaxDatasetLineBytes)}
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("dataset line %d: %w", n, err)
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		c, derr := parseCase(line, n)
		if derr != nil {
			return nil, &DatasetError{n, derr}
		}
		if len(cases) == MaxEvalCases {
			return nil, &DatasetError{n, keel.Errorf(keel.CodeTooLarge, "a dataset has at most %d cases", MaxEvalCases)}
		}
		if seen[c.ID] {
			return nil, &DatasetError{n, keel.Errorf(keel.CodeInvalidInput, "ID %q is taken by an earlier line", c.ID)}
		}
		seen[c.ID] = true
		cases = append(cases, c)
	}
	if len(cases) == 0 {
		return nil, &DatasetError{0, keel.Errorf(keel.CodeInvalidInput, "the dataset has no cases")}
	}
	return cases, nil
}

// parseCase decodes and checks line n.
func parseCase(line []byte, n int) (EvalCase, *keel.Error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	var c EvalCase
	if err := dec.Decode(&c); err != nil {
		return c, keel.Errorf(keel.CodeInvalidInput, "not a case: %s", clipText(err.Error(), 200))
	}
	if dec.More() {
		return c, keel.Errorf(keel.CodeInvalidInput, "more than one JSON value")
	}
	if c.From != nil {
		return c, keel.Errorf(keel.CodeInvalidInput, "\"from\" is set by an eval over recorded sessions, never by a dataset")
	}
	if c.ID == "" {
		c.ID = "line-" + strconv.Itoa(n)
	}
	if err := c.Validate(); err != nil {
		var ke *keel.Error
		if errors.As(err, &ke) {
			return c, ke
		}
		return c, keel.Errorf(keel.CodeInvalidInput, "%v", err)
	}
	return c, nil
}

var errLineTooLong = errors.New("api: dataset line too long")

// readLine reads one line without its newline, reading at most limit+1
// bytes of it: a longer line is errLineTooLong, and the rest of it is
// never buffered.
func readLine(br *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > limit+1 {
			return nil, errLineTooLong
		}
		switch {
		case err == nil:
			return bytes.TrimSuffix(line, []byte("\n")), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0:
			return line, nil
		default:
			return nil, err
		}
	}
}

// clipText cuts s to n bytes.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
