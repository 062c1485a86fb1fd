package tool

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strings"
)

// ListFilesArgs are the arguments of list_files.
type ListFilesArgs struct {
	Path      string `json:"path,omitempty" jsonschema:"description=Directory relative to the workspace root (default: the root)."`
	Recursive bool   `json:"recursive,omitempty" jsonschema:"description=Also list the contents of subdirectories."`
}

// ListFiles returns the list_files tool: the entries of a workspace
// directory, one path (relative to the workspace root) a line, directories
// with a trailing "/", symbolic links as "link -> target". Symbolic links
// are listed, never followed. At most MaxListEntries entries are listed; a
// note says when more were left out.
func (w *Workspace) ListFiles() Tool {
	return New("list_files",
		"List the files and directories in a workspace directory (the root by default), "+
			"optionally recursively. Paths are relative to the workspace root; directories end with /.",
		w.listFiles)
}

var errListFull = errors.New("listing full")

func (w *Workspace) listFiles(ctx context.Context, args ListFilesArgs) (string, error) {
	if args.Path == "" {
		args.Path = "."
	}
	p, err := local(args.Path)
	if err != nil {
		return "", err
	}
	start := filepath.ToSlash(p)
	st, err := w.root.Stat(p)
	if err != nil {
		return "", w.describe("list", args.Path, err)
	}
	if !st.IsDir() {
		return start, nil
	}
	var b strings.Builder
	n, limit := 0, w.maxListEntries()
	err = fs.WalkDir(w.root.FS(), start, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			if name == start {
				return err
			}
			// An unreadable subdirectory is noted, not fatal.
			fmt.Fprintf(&b, "[%s/ could not be read]\n", name)
			return nil
		}
		if name == start {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if n == limit {
			return errListFull
		}
		n++
		b.WriteString(name)
		switch {
		case d.IsDir():
			b.WriteString("/\n")
			if !args.Recursive {
				return fs.SkipDir
			}
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			if target, err := w.root.Readlink(filepath.FromSlash(name)); err == nil {
				b.WriteString(" -> " + target)
			}
		}
		b.WriteByte('\n')
		return nil
	})
	switch {
	case errors.Is(err, errListFull):
		fmt.Fprintf(&b, "[listing stopped after %d entries; list a subdirectory to see more]\n", limit)
	case err != nil && ctx.Err() != nil:
		return "", ctx.Err()
	case err != nil:
		return "", w.describe("list", args.Path, err)
	}
	if n == 0 {
		return fmt.Sprintf("(%s is empty)", path.Clean(start)), nil
	}
	return b.String(), nil
}
