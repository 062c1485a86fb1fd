package scripted

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const okScript = `{"turns":[{"text":["ok"]}]}`

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// within runs f and fails the test if it does not return within d: a
// read that blocks (a FIFO, a device) would hang here.
func within(t *testing.T, d time.Duration, f func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("still blocked after %v", d)
	}
}

func TestValidName(t *testing.T) {
	for _, name := range []string{"demo", "a", "turns-2", "v1.2_final", "A9", strings.Repeat("x", MaxNameBytes)} {
		if !ValidName(name) {
			t.Errorf("ValidName(%q) = false, want true", name)
		}
	}
	for _, name := range []string{"", "/etc/passwd", "../x", "..", ".", ".hidden", "a/b", `a\b`, "a..b", "a b",
		"x.json/", "scripted:x", "-x", "_x", "é", "a\x00b", strings.Repeat("x", MaxNameBytes+1)} {
		if ValidName(name) {
			t.Errorf("ValidName(%q) = true, want false", name)
		}
	}
}

func TestDirScripts(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "hello.json"), okScript)
	writeFile(t, filepath.Join(dir, "broken.json"), `{"turns":`)
	writeFile(t, filepath.Join(dir, "notes.txt"), okScript)
	outside := filepath.Join(t.TempDir(), "secret.json")
	writeFile(t, outside, okScript)
	if err := os.Symlink(outside, filepath.Join(dir, "escape.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("hello.json", filepath.Join(dir, "alias.json")); err != nil {
		t.Fatal(err)
	}
	d, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()

	s, err := d.Script("hello")
	if err != nil || s.Turns[0].Text[0] != "ok" {
		t.Fatalf("Script(hello) = %+v, %v", s, err)
	}
	if again, _ := d.Script("hello"); again != s {
		t.Error("an unchanged script was read again")
	}
	if !d.Has("hello") || !d.Has("alias") {
		t.Error("Has: a script or a symlink inside the directory is missing")
	}
	if _, err := d.Script("alias"); err != nil {
		t.Errorf("a symlink inside the directory: %v", err)
	}
	for name, want := range map[string]error{
		"missing": ErrNoScript, "notes": ErrNoScript, "escape": ErrNoScript,
		"../x": ErrBadName, "/etc/passwd": ErrBadName, "hello.json": nil, "a/b": ErrBadName, "": ErrBadName,
	} {
		if want == nil {
			want = ErrNoScript // hello.json.json
		}
		if _, err := d.Script(name); !errors.Is(err, want) {
			t.Errorf("Script(%q) = %v, want %v", name, err, want)
		}
		if d.Has(name) {
			t.Errorf("Has(%q) = true", name)
		}
	}
	if _, err := d.Script("broken"); err == nil || !strings.Contains(err.Error(), "broken.json") {
		t.Errorf("Script(broken) = %v, want the parse error naming the file", err)
	}
	names, more := d.Names(10)
	if strings.Join(names, ",") != "alias,broken,hello" || more {
		t.Errorf("Names = %v, %v", names, more)
	}
	if names, more := d.Names(1); len(names) != 1 || !more {
		t.Errorf("Names(1) = %v, %v; want one and more", names, more)
	}

	// A changed file is read again; a removed one is gone.
	writeFile(t, filepath.Join(dir, "hello.json"), `{"turns":[{"text":["changed"]}]}`)
	if s, err := d.Script("hello"); err != nil || s.Turns[0].Text[0] != "changed" {
		t.Errorf("after an edit: %+v, %v", s, err)
	}
	if err := os.Remove(filepath.Join(dir, "hello.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Script("hello"); !errors.Is(err, ErrNoScript) {
		t.Errorf("after removal: %v", err)
	}
}

func TestScriptSizeBound(t *testing.T) {
	dir := t.TempDir()
	// Exactly at the bound: whitespace after the JSON.
	writeFile(t, filepath.Join(dir, "full.json"), okScript+strings.Repeat(" ", MaxScriptBytes-len(okScript)))
	writeFile(t, filepath.Join(dir, "over.json"), okScript+strings.Repeat(" ", MaxScriptBytes+1-len(okScript)))
	d, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Script("full"); err != nil {
		t.Errorf("a script of MaxScriptBytes: %v", err)
	}
	_, err = d.Script("over")
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a script over MaxScriptBytes: %v, want ErrTooLarge", err)
	}
	if _, err := Load(filepath.Join(dir, "over.json")); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Load of an oversize file: %v, want ErrTooLarge", err)
	}
}

// Uses of one name during its read share that read; uses of others do
// not wait for it.
func TestDirSharesReads(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "big.json"), okScript+strings.Repeat(" ", MaxScriptBytes/2))
	writeFile(t, filepath.Join(dir, "small.json"), okScript)
	d, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	const n = 32
	got := make([]*Script, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			name := "big"
			if i%2 == 1 {
				name = "small"
			}
			s, err := d.Script(name)
			if err != nil {
				t.Error(err)
			}
			got[i] = s
		})
	}
	wg.Wait()
	for i := 2; i < n; i++ {
		if got[i] != got[i%2] {
			t.Fatalf("use %d got a script of its own read", i)
		}
	}
}

func TestLibrary(t *testing.T) {
	var l Library
	s := mustParse(t, okScript)
	if err := l.Add("../x", s); !errors.Is(err, ErrBadName) {
		t.Errorf("Add(../x) = %v", err)
	}
	if err := l.Add("x", &Script{}); err == nil {
		t.Error("Add of a script without turns succeeded")
	}
	if err := l.Add("x", s); err != nil {
		t.Fatal(err)
	}
	if got, err := l.Script("x"); err != nil || got != s || !l.Has("x") {
		t.Errorf("Script(x) = %v, %v", got, err)
	}
	if _, err := l.Script("y"); !errors.Is(err, ErrNoScript) {
		t.Errorf("Script(y) = %v", err)
	}
	if names, more := l.Names(5); len(names) != 1 || more {
		t.Errorf("Names = %v, %v", names, more)
	}
}
