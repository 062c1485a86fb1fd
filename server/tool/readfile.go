package tool

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// ReadFileArgs are the arguments of read_file.
type ReadFileArgs struct {
	Path   string `json:"path" jsonschema:"description=File path relative to the workspace root."`
	Offset int    `json:"offset,omitempty" jsonschema:"minimum=1,description=First line to read (1-based; default 1)."`
	Limit  int    `json:"limit,omitempty" jsonschema:"minimum=1,description=Most lines to read (default: as many as fit the output cap)."`
}

// ReadFile returns the read_file tool: the text of a file in the workspace,
// optionally a range of lines. Output beyond MaxReadBytes is cut with a note
// giving the offset to continue from; binary files are described, not
// shown.
func (w *Workspace) ReadFile() Tool {
	return New("read_file",
		"Read a text file in the workspace. Long files are cut; the output then ends with a note "+
			"giving the offset to continue from.",
		w.readFile)
}

// sniffLen is how much of a file is checked for NUL bytes, as git does.
const sniffLen = 8000

func (w *Workspace) readFile(ctx context.Context, args ReadFileArgs) (string, error) {
	p, err := local(args.Path)
	if err != nil {
		return "", err
	}
	f, err := w.root.Open(p)
	if err != nil {
		return "", w.describe("read", args.Path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", w.describe("read", args.Path, err)
	}
	if st.IsDir() {
		return "", Failf("read %q: it is a directory; use list_files", args.Path)
	}
	br := bufio.NewReaderSize(f, 64<<10)
	head, err := br.Peek(sniffLen)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return "", w.describe("read", args.Path, err)
	}
	if bytes.IndexByte(head, 0) >= 0 {
		return fmt.Sprintf("%s is a binary file (%d bytes); not shown", args.Path, st.Size()), nil
	}

	first := max(args.Offset, 1)
	line := 1 // the line br is at
	for line < first {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		chunk, err := br.ReadSlice('\n')
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue // the same long line goes on
		case errors.Is(err, io.EOF):
			if len(chunk) == 0 {
				line--
			}
			return "", Failf("read %q: offset %d is past the end of the file (%d lines)", args.Path, first, line)
		case err != nil:
			return "", w.describe("read", args.Path, err)
		}
		line++
	}

	var out bytes.Buffer
	budget := w.maxReadBytes()
	lineStart := true // chunk begins a line
	for args.Limit == 0 || line < first+args.Limit {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > budget {
			if lineStart && out.Len() > 0 {
				// End on a whole line; the next call starts with this one.
				return out.String() + fmt.Sprintf("[output cut at %d bytes after line %d; call read_file with offset=%d to continue]",
					w.maxReadBytes(), line-1, line), nil
			}
			// A line longer than the cap is shown in part.
			out.Write(validPrefix(chunk[:budget]))
			return out.String() + fmt.Sprintf("\n[output cut at %d bytes in line %d, which is longer than that]",
				w.maxReadBytes(), line), nil
		}
		out.Write(chunk)
		budget -= len(chunk)
		lineStart = !errors.Is(err, bufio.ErrBufferFull)
		switch {
		case !lineStart:
			continue
		case errors.Is(err, io.EOF):
			if out.Len() == 0 && first == 1 {
				return fmt.Sprintf("(%s is empty)", args.Path), nil
			}
			if out.Len() == 0 {
				return "", Failf("read %q: offset %d is past the end of the file (%d lines)", args.Path, first, line-1)
			}
			return out.String(), nil
		case err != nil:
			return "", w.describe("read", args.Path, err)
		}
		line++
	}
	if _, err := br.Peek(1); err == nil {
		return out.String() + fmt.Sprintf("[lines %d-%d shown; the file goes on: call read_file with offset=%d to continue]",
			first, line-1, line), nil
	}
	return out.String(), nil
}

// validPrefix drops a UTF-8 sequence cut in half at the end of b.
func validPrefix(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			break
		}
	}
	return b
}
