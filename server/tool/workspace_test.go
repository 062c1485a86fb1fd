package tool

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// newTestWorkspace builds
//
//	outside/secret.txt
//	ws/notes.txt, ws/sub/inner.txt, ws/empty/
//	ws/link_in -> notes.txt          (inside: allowed)
//	ws/dir_in -> sub                 (inside: allowed)
//	ws/link_out -> ../outside/secret.txt
//	ws/dir_out -> ../outside
//	ws/abs_out -> <abs>/outside/secret.txt
//	ws/abs_in -> <abs>/ws/notes.txt  (absolute: refused by os.Root)
//
// and returns the workspace and the outside directory.
func newTestWorkspace(t *testing.T) (*Workspace, string) {
	t.Helper()
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	ws := filepath.Join(base, "ws")
	for _, d := range []string{outside, filepath.Join(ws, "sub"), filepath.Join(ws, "empty")} {
		must(t, os.MkdirAll(d, 0o755))
	}
	must(t, os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("top secret\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("one\ntwo\nthree\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(ws, "sub", "inner.txt"), []byte("inner\n"), 0o644))
	must(t, os.Symlink("notes.txt", filepath.Join(ws, "link_in")))
	must(t, os.Symlink("sub", filepath.Join(ws, "dir_in")))
	must(t, os.Symlink("../outside/secret.txt", filepath.Join(ws, "link_out")))
	must(t, os.Symlink("../outside", filepath.Join(ws, "dir_out")))
	must(t, os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(ws, "abs_out")))
	must(t, os.Symlink(filepath.Join(ws, "notes.txt"), filepath.Join(ws, "abs_in")))
	w, err := NewWorkspace(ws)
	must(t, err)
	t.Cleanup(func() { w.Close() })
	return w, outside
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func call(t *testing.T, tl Tool, args any) Result {
	t.Helper()
	raw, err := json.Marshal(args)
	must(t, err)
	res, err := tl.Call(context.Background(), raw)
	if err != nil {
		t.Fatalf("%s(%s): error %v; want a result", tl.Spec().Name, raw, err)
	}
	return res
}

func fail(msg string) Result { return Result{Output: msg, IsError: true} }

func TestReadFileConfinement(t *testing.T) {
	w, _ := newTestWorkspace(t)
	tests := []struct {
		path string
		want Result
	}{
		{"notes.txt", Result{Output: "one\ntwo\nthree\n"}},
		{"./sub/../notes.txt", Result{Output: "one\ntwo\nthree\n"}},
		{"link_in", Result{Output: "one\ntwo\nthree\n"}},
		{"dir_in/inner.txt", Result{Output: "inner\n"}},
		{"../outside/secret.txt", fail(`path "../outside/secret.txt" leaves the workspace; paths must stay inside the workspace root`)},
		{"a/../../x", fail(`path "a/../../x" leaves the workspace; paths must stay inside the workspace root`)},
		{"..", fail(`path ".." leaves the workspace; paths must stay inside the workspace root`)},
		{"/etc/passwd", fail(`path "/etc/passwd" is absolute; paths are relative to the workspace root`)},
		{"link_out", fail(`read "link_out": refused: the path leads outside the workspace through a symbolic link`)},
		{"dir_out/secret.txt", fail(`read "dir_out/secret.txt": refused: the path leads outside the workspace through a symbolic link`)},
		{"abs_out", fail(`read "abs_out": refused: the path leads outside the workspace through a symbolic link`)},
		{"abs_in", fail(`read "abs_in": refused: symbolic link "abs_in" is absolute; links in the workspace must be relative`)},
		{"missing.txt", fail(`read "missing.txt": no such file or directory`)},
		{"sub", fail(`read "sub": it is a directory; use list_files`)},
		{"", fail(`path is empty; use a path relative to the workspace root, such as "src/main.go" or "."`)},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			got := call(t, w.ReadFile(), ReadFileArgs{Path: tt.path})
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("read_file (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadFileRanges(t *testing.T) {
	w, _ := newTestWorkspace(t)
	write := func(name, content string) {
		must(t, os.WriteFile(filepath.Join(w.Dir(), name), []byte(content), 0o644))
	}
	write("ten.txt", "l1\nl2\nl3\nl4\nl5\nl6\nl7\nl8\nl9\nl10\n")
	write("long.txt", strings.Repeat("x", 100)+"\nnext\n")
	write("noeol.txt", "a\nb")
	write("empty.txt", "")
	write("utf8.txt", "ééééé\n") // 2 bytes a rune
	write("bin.dat", "PK\x03\x04\x00\x00binary")

	tests := []struct {
		name     string
		args     ReadFileArgs
		maxBytes int
		want     Result
	}{
		{"offset and limit", ReadFileArgs{Path: "ten.txt", Offset: 3, Limit: 2}, 0,
			Result{Output: "l3\nl4\n[lines 3-4 shown; the file goes on: call read_file with offset=5 to continue]"}},
		{"limit to the end", ReadFileArgs{Path: "ten.txt", Offset: 9, Limit: 2}, 0, Result{Output: "l9\nl10\n"}},
		{"limit past the end", ReadFileArgs{Path: "ten.txt", Offset: 9, Limit: 5}, 0, Result{Output: "l9\nl10\n"}},
		{"offset past the end", ReadFileArgs{Path: "ten.txt", Offset: 11}, 0,
			fail(`read "ten.txt": offset 11 is past the end of the file (10 lines)`)},
		{"far past the end", ReadFileArgs{Path: "ten.txt", Offset: 50}, 0,
			fail(`read "ten.txt": offset 50 is past the end of the file (10 lines)`)},
		{"last line without newline", ReadFileArgs{Path: "noeol.txt", Offset: 2}, 0, Result{Output: "b"}},
		{"past a last line without newline", ReadFileArgs{Path: "noeol.txt", Offset: 3}, 0,
			fail(`read "noeol.txt": offset 3 is past the end of the file (2 lines)`)},
		{"cut at the byte cap", ReadFileArgs{Path: "ten.txt"}, 8,
			Result{Output: "l1\nl2\n[output cut at 8 bytes after line 2; call read_file with offset=3 to continue]"}},
		{"cut at the byte cap after an offset", ReadFileArgs{Path: "ten.txt", Offset: 9}, 4,
			Result{Output: "l9\n[output cut at 4 bytes after line 9; call read_file with offset=10 to continue]"}},
		{"cut inside a long line", ReadFileArgs{Path: "long.txt"}, 10,
			Result{Output: "xxxxxxxxxx\n[output cut at 10 bytes in line 1, which is longer than that]"}},
		{"cut keeps whole runes", ReadFileArgs{Path: "utf8.txt"}, 5,
			Result{Output: "éé\n[output cut at 5 bytes in line 1, which is longer than that]"}},
		{"empty", ReadFileArgs{Path: "empty.txt"}, 0, Result{Output: "(empty.txt is empty)"}},
		{"binary", ReadFileArgs{Path: "bin.dat"}, 0, Result{Output: "bin.dat is a binary file (12 bytes); not shown"}},
		{"bad offset", ReadFileArgs{Path: "ten.txt", Offset: -1}, 0,
			fail(`invalid arguments for tool "read_file": at /offset: minimum: got -1, want 1`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w.MaxReadBytes = tt.maxBytes
			got := call(t, w.ReadFile(), tt.args)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("read_file (-want +got):\n%s", diff)
			}
		})
	}
}

// A file far larger than the cap is cut without being read whole.
func TestReadFileBigFile(t *testing.T) {
	w, _ := newTestWorkspace(t)
	line := strings.Repeat("y", 99) + "\n"
	must(t, os.WriteFile(filepath.Join(w.Dir(), "big.txt"), []byte(strings.Repeat(line, 20000)), 0o644)) // 2 MB
	got := call(t, w.ReadFile(), ReadFileArgs{Path: "big.txt"})
	want := strings.Repeat(line, DefaultMaxReadBytes/100) +
		"[output cut at 65536 bytes after line 655; call read_file with offset=656 to continue]"
	if got.IsError || got.Output != want {
		t.Errorf("read_file of a 2 MB file: %d bytes ending %q; want %d bytes ending %q",
			len(got.Output), got.Output[max(0, len(got.Output)-100):], len(want), want[len(want)-100:])
	}
}

func TestWriteFile(t *testing.T) {
	w, outside := newTestWorkspace(t)
	tests := []struct {
		name string
		args WriteFileArgs
		want Result
	}{
		{"new file in new directories", WriteFileArgs{Path: "a/b/c.txt", Content: "hello\n"}, Result{Output: "wrote 6 bytes to a/b/c.txt"}},
		{"overwrite", WriteFileArgs{Path: "notes.txt", Content: "new"}, Result{Output: "wrote 3 bytes to notes.txt"}},
		{"empty content", WriteFileArgs{Path: "e.txt"}, Result{Output: "wrote 0 bytes to e.txt"}},
		{"through an inside directory link", WriteFileArgs{Path: "dir_in/x.txt", Content: "x"}, Result{Output: "wrote 1 bytes to dir_in/x.txt"}},
		{"dot dot", WriteFileArgs{Path: "../outside/evil.txt", Content: "x"},
			fail(`path "../outside/evil.txt" leaves the workspace; paths must stay inside the workspace root`)},
		{"absolute", WriteFileArgs{Path: filepath.Join(outside, "evil.txt"), Content: "x"},
			fail(`path "` + filepath.Join(outside, "evil.txt") + `" is absolute; paths are relative to the workspace root`)},
		{"symlinked directory", WriteFileArgs{Path: "dir_out/evil.txt", Content: "x"},
			fail(`write "dir_out/evil.txt": refused: the path leads outside the workspace through a symbolic link`)},
		{"new directory under a symlinked directory", WriteFileArgs{Path: "dir_out/new/evil.txt", Content: "x"},
			fail(`write "dir_out/new/evil.txt": refused: the path leads outside the workspace through a symbolic link`)},
		{"symlinked file", WriteFileArgs{Path: "link_out", Content: "x"},
			fail(`write "link_out": refused: the path leads outside the workspace through a symbolic link`)},
		{"directory", WriteFileArgs{Path: "sub", Content: "x"}, fail(`write "sub": it is a directory`)},
		{"missing path", WriteFileArgs{Content: "x"}, fail(`path is empty; use a path relative to the workspace root, such as "src/main.go" or "."`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := call(t, w.WriteFile(), tt.args)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("write_file (-want +got):\n%s", diff)
			}
			if got.IsError {
				return
			}
			read := call(t, w.ReadFile(), ReadFileArgs{Path: tt.args.Path})
			want := tt.args.Content
			if want == "" {
				want = "(" + tt.args.Path + " is empty)"
			}
			if read.Output != want {
				t.Errorf("read back %q, want %q", read.Output, want)
			}
		})
	}

	// Nothing leaked out, and no temporary files were left behind.
	entries, err := os.ReadDir(outside)
	must(t, err)
	if len(entries) != 1 {
		t.Errorf("outside directory holds %d entries, want only secret.txt", len(entries))
	}
	secret, err := os.ReadFile(filepath.Join(outside, "secret.txt"))
	must(t, err)
	if string(secret) != "top secret\n" {
		t.Errorf("outside file changed to %q", secret)
	}
	listing := call(t, w.ListFiles(), ListFilesArgs{Recursive: true})
	if strings.Contains(listing.Output, ".keel-") {
		t.Errorf("temporary files left:\n%s", listing.Output)
	}
}

// Writing the content a file already has changes nothing, so a retried
// call is harmless; a changed content replaces the file atomically and
// keeps its permissions.
func TestWriteFileIdempotentAndAtomic(t *testing.T) {
	w, _ := newTestWorkspace(t)
	path := filepath.Join(w.Dir(), "run.sh")
	must(t, os.WriteFile(path, []byte("echo hi\n"), 0o750))
	before, err := os.Stat(path)
	must(t, err)

	got := call(t, w.WriteFile(), WriteFileArgs{Path: "run.sh", Content: "echo hi\n"})
	if diff := cmp.Diff(Result{Output: "run.sh already has this content (8 bytes); nothing written"}, got); diff != "" {
		t.Errorf("same content (-want +got):\n%s", diff)
	}
	same, err := os.Stat(path)
	must(t, err)
	if !os.SameFile(before, same) || !same.ModTime().Equal(before.ModTime()) {
		t.Error("writing the same content replaced the file")
	}

	got = call(t, w.WriteFile(), WriteFileArgs{Path: "run.sh", Content: "echo bye\n"})
	if diff := cmp.Diff(Result{Output: "wrote 9 bytes to run.sh"}, got); diff != "" {
		t.Errorf("new content (-want +got):\n%s", diff)
	}
	after, err := os.Stat(path)
	must(t, err)
	if os.SameFile(before, after) {
		t.Error("file was rewritten in place; want a new file renamed over it")
	}
	if after.Mode().Perm() != 0o750 {
		t.Errorf("mode %v, want 0750 kept", after.Mode().Perm())
	}
}

// Resolution happens on every call: a directory swapped for a symlink to
// the outside after a first write is refused on the next.
func TestWriteFileDirectorySwappedForSymlink(t *testing.T) {
	w, outside := newTestWorkspace(t)
	if got := call(t, w.WriteFile(), WriteFileArgs{Path: "swap/f.txt", Content: "1"}); got.IsError {
		t.Fatalf("first write: %s", got.Output)
	}
	must(t, os.RemoveAll(filepath.Join(w.Dir(), "swap")))
	must(t, os.Symlink(outside, filepath.Join(w.Dir(), "swap")))
	got := call(t, w.WriteFile(), WriteFileArgs{Path: "swap/f.txt", Content: "2"})
	want := fail(`write "swap/f.txt": refused: the path leads outside the workspace through a symbolic link`)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("write through swapped directory (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(outside, "f.txt")); !os.IsNotExist(err) {
		t.Errorf("file created outside the workspace (stat error %v)", err)
	}
}

func TestListFiles(t *testing.T) {
	w, _ := newTestWorkspace(t)
	var absLine string // the absolute links' targets depend on the temp dir
	for _, name := range []string{"abs_in", "abs_out"} {
		target, err := os.Readlink(filepath.Join(w.Dir(), name))
		must(t, err)
		absLine += name + " -> " + target + "\n"
	}

	tests := []struct {
		name       string
		args       ListFilesArgs
		maxEntries int
		want       Result
	}{
		{"root", ListFilesArgs{}, 0, Result{Output: absLine +
			"dir_in -> sub\ndir_out -> ../outside\nempty/\nlink_in -> notes.txt\nlink_out -> ../outside/secret.txt\nnotes.txt\nsub/\n"}},
		{"recursive", ListFilesArgs{Path: ".", Recursive: true}, 0, Result{Output: absLine +
			"dir_in -> sub\ndir_out -> ../outside\nempty/\nlink_in -> notes.txt\nlink_out -> ../outside/secret.txt\nnotes.txt\nsub/\nsub/inner.txt\n"}},
		{"subdirectory", ListFilesArgs{Path: "sub"}, 0, Result{Output: "sub/inner.txt\n"}},
		{"through an inside link", ListFilesArgs{Path: "dir_in"}, 0, Result{Output: "dir_in/inner.txt\n"}},
		{"a file", ListFilesArgs{Path: "notes.txt"}, 0, Result{Output: "notes.txt"}},
		{"empty directory", ListFilesArgs{Path: "empty"}, 0, Result{Output: "(empty is empty)"}},
		{"capped", ListFilesArgs{Recursive: true}, 3, Result{Output: absLine +
			"dir_in -> sub\n[listing stopped after 3 entries; list a subdirectory to see more]\n"}},
		{"symlinked directory", ListFilesArgs{Path: "dir_out"}, 0,
			fail(`list "dir_out": refused: the path leads outside the workspace through a symbolic link`)},
		{"dot dot", ListFilesArgs{Path: "sub/../.."}, 0,
			fail(`path "sub/../.." leaves the workspace; paths must stay inside the workspace root`)},
		{"absolute", ListFilesArgs{Path: "/"}, 0, fail(`path "/" is absolute; paths are relative to the workspace root`)},
		{"missing", ListFilesArgs{Path: "nope"}, 0, fail(`list "nope": no such file or directory`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w.MaxListEntries = tt.maxEntries
			got := call(t, w.ListFiles(), tt.args)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("list_files (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewWorkspaceErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	must(t, os.WriteFile(file, nil, 0o644))
	for _, dir := range []string{filepath.Join(t.TempDir(), "missing"), file} {
		if w, err := NewWorkspace(dir); err == nil {
			w.Close()
			t.Errorf("NewWorkspace(%q) succeeded; want an error", dir)
		}
	}
}

func TestBuiltins(t *testing.T) {
	reg, err := Builtins(t.TempDir())
	must(t, err)
	want := []string{"ask_user", "list_files", "read_file", "sleep", "write_file"}
	if diff := cmp.Diff(want, reg.Names()); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	specs, err := reg.Specs(want)
	must(t, err)
	for _, s := range specs {
		if err := CheckSchema(s.Parameters); err != nil || s.Description == "" {
			t.Errorf("%s: schema error %v, description %q", s.Name, err, s.Description)
		}
	}
	if _, err := Builtins(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("Builtins with a missing workspace succeeded")
	}
	if err := reg.Register(Sleep()); err == nil {
		t.Error("registering sleep twice succeeded")
	}
}
