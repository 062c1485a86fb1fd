package tool

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteFileArgs are the arguments of write_file.
type WriteFileArgs struct {
	Path    string `json:"path" jsonschema:"description=File path relative to the workspace root. Missing parent directories are created."`
	Content string `json:"content" jsonschema:"description=The complete new content of the file."`
}

// WriteFile returns the write_file tool: it replaces a file's content,
// creating the file and its parent directories as needed. The write is
// atomic (a temporary file renamed over the target), so a reader or a crash
// sees the old content or the new, never a mix; and writing the content a
// file already has changes nothing, so a retried call is harmless.
func (w *Workspace) WriteFile() Tool {
	return New("write_file",
		"Create or overwrite a file in the workspace with the given content. Parent directories are created.",
		w.writeFile)
}

func (w *Workspace) writeFile(ctx context.Context, args WriteFileArgs) (string, error) {
	p, err := local(args.Path)
	if err != nil {
		return "", err
	}
	content := []byte(args.Content)
	mode := fs.FileMode(0o644)
	switch st, err := w.root.Stat(p); {
	case err == nil && st.IsDir():
		return "", Failf("write %q: it is a directory", args.Path)
	case err == nil:
		mode = st.Mode().Perm()
		// Compare only when the sizes match: no need to read a big file
		// that is about to be replaced anyway.
		if st.Size() != int64(len(content)) {
			break
		}
		if old, err := w.root.ReadFile(p); err == nil && bytes.Equal(old, content) {
			return fmt.Sprintf("%s already has this content (%d bytes); nothing written", args.Path, len(content)), nil
		}
	case !errors.Is(err, fs.ErrNotExist):
		return "", w.describe("write", args.Path, err)
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	dir := filepath.Dir(p)
	if err := w.root.MkdirAll(dir, 0o755); err != nil {
		return "", w.describe("create directory", dir, err)
	}
	tmp, err := w.writeTemp(dir, filepath.Base(p), content, mode)
	if err != nil {
		return "", w.describe("write", args.Path, err)
	}
	if err := w.root.Rename(tmp, p); err != nil {
		_ = w.root.Remove(tmp)
		return "", w.describe("write", args.Path, err)
	}
	return fmt.Sprintf("wrote %d bytes to %s", len(content), args.Path), nil
}

// writeTemp writes content to a new file next to the target, so the rename
// that publishes it stays within one file system.
func (w *Workspace) writeTemp(dir, base string, content []byte, mode fs.FileMode) (string, error) {
	var suffix [8]byte
	_, _ = rand.Read(suffix[:])
	tmp := filepath.Join(dir, "."+base+".keel-"+hex.EncodeToString(suffix[:]))
	f, err := w.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return "", err
	}
	_, err = f.Write(content)
	if err == nil {
		err = f.Sync() // the rename must not publish a file whose data is still in flight
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = w.root.Remove(tmp)
		return "", err
	}
	return tmp, nil
}
