package tool

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Defaults of a Workspace's output caps.
const (
	DefaultMaxReadBytes   = 64 << 10
	DefaultMaxListEntries = 1000
)

// Workspace is a directory the file tools (read_file, write_file,
// list_files) are confined to. Every path the model gives is relative to
// the workspace root; absolute paths, paths with ".." that leave the root,
// and symbolic links that lead outside it (as the last component or any
// parent, including links swapped in while a call runs) are refused. The
// confinement comes from os.Root, which resolves every path component
// inside the root's open directory handle; the lexical checks in front of it
// only make the refusals readable.
//
// Set the exported fields before the tools are used.
type Workspace struct {
	// MaxReadBytes caps the output of one read_file call; a longer read
	// is cut with a note telling the model where to continue. Zero means
	// DefaultMaxReadBytes.
	MaxReadBytes int
	// MaxListEntries caps the entries of one list_files call. Zero means
	// DefaultMaxListEntries.
	MaxListEntries int

	root *os.Root
	dir  string // the root's path with symlinks resolved, for messages
}

// NewWorkspace opens dir, which must be an existing directory, as a
// workspace. Close it when the tools are no longer used.
func NewWorkspace(dir string) (*Workspace, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("tool: workspace %q: %w", dir, err)
	}
	if resolved, err := filepath.EvalSymlinks(abs); err == nil {
		abs = resolved
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("tool: workspace: %w", err)
	}
	return &Workspace{root: root, dir: abs}, nil
}

// Dir returns the workspace root's absolute path.
func (w *Workspace) Dir() string { return w.dir }

// Close releases the workspace's directory handle. Its tools fail after.
func (w *Workspace) Close() error { return w.root.Close() }

// Tools returns read_file, write_file and list_files.
func (w *Workspace) Tools() []Tool { return []Tool{w.ReadFile(), w.WriteFile(), w.ListFiles()} }

func (w *Workspace) maxReadBytes() int {
	if w.MaxReadBytes > 0 {
		return w.MaxReadBytes
	}
	return DefaultMaxReadBytes
}

func (w *Workspace) maxListEntries() int {
	if w.MaxListEntries > 0 {
		return w.MaxListEntries
	}
	return DefaultMaxListEntries
}

// local checks p lexically and returns it cleaned. os.Root would refuse
// the same paths; checking first gives the model a message it can act on.
func local(p string) (string, error) {
	switch {
	case p == "":
		return "", Failf("path is empty; use a path relative to the workspace root, such as \"src/main.go\" or \".\"")
	case filepath.IsAbs(p) || strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\`):
		return "", Failf("path %q is absolute; paths are relative to the workspace root", p)
	case !filepath.IsLocal(p):
		return "", Failf("path %q leaves the workspace; paths must stay inside the workspace root", p)
	}
	return filepath.Clean(p), nil
}

// describe turns a failed file operation on p into a message for the
// model.
func (w *Workspace) describe(op, p string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return Failf("%s %q: no such file or directory", op, p)
	case w.escapes(p):
		return Failf("%s %q: refused: the path leads outside the workspace through a symbolic link", op, p)
	case errors.Is(err, fs.ErrPermission):
		return Failf("%s %q: permission denied", op, p)
	}
	if link := w.absoluteLink(p); link != "" {
		return Failf("%s %q: refused: symbolic link %q is absolute; links in the workspace must be relative", op, p, link)
	}
	var perr *fs.PathError
	if errors.As(err, &perr) {
		err = perr.Err // the op and path are already in the message
	}
	return Failf("%s %q: %v", op, p, err)
}

// escapes reports whether p, with symlinks resolved as far as they exist,
// is outside the workspace. It only chooses an error message; os.Root
// enforces the confinement.
func (w *Workspace) escapes(p string) bool {
	full := filepath.Join(w.dir, p)
	rest := ""
	for {
		if resolved, err := filepath.EvalSymlinks(full); err == nil {
			full = filepath.Join(resolved, rest)
			break
		}
		parent := filepath.Dir(full)
		if parent == full {
			return false
		}
		rest = filepath.Join(filepath.Base(full), rest)
		full = parent
	}
	rel, err := filepath.Rel(w.dir, full)
	return err != nil || !filepath.IsLocal(rel) && rel != "."
}

// absoluteLink returns the first component of p that is a symbolic link
// with an absolute target, which os.Root refuses even when it points
// inside. Like escapes, it only chooses an error message.
func (w *Workspace) absoluteLink(p string) string {
	prefix := ""
	for _, part := range strings.Split(filepath.Clean(p), string(filepath.Separator)) {
		prefix = filepath.Join(prefix, part)
		target, err := os.Readlink(filepath.Join(w.dir, prefix))
		if err == nil && filepath.IsAbs(target) {
			return prefix
		}
	}
	return ""
}
