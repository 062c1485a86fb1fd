// Package modtest builds a program outside this repository against the
// checkout, as a user's own module would build it, and measures what the
// build downloaded: the client's and the server's boundary tests
// (docs/ARCHITECTURE.md, "Modules").
//
// The build has a module cache of its own, filled from this machine's
// module cache through the module proxy protocol (GOPROXY=file://…), so
// every module it needs is really fetched and counted, yet nothing comes
// from the network. The checksum database is off (GOSUMDB=off): it is
// on the network, and the modules come from a cache the go command
// filled and verified. Build checks the hashes all the same: every line
// of the program's go.sum must be one of the repository's go.sum lines,
// which the checksum database vouched for when they were recorded.
package modtest

import (
	"bufio"
	"context"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Mode is how a build completes the program's requirements.
type Mode int

const (
	// Tidy runs go mod tidy first, as a user who tidies does: it also
	// fetches the go.mod of every module in the graph and the modules the
	// dependencies' tests import.
	Tidy Mode = iota
	// BuildOnly lets go build add what the build needs (-mod=mod), as
	// go get does.
	BuildOnly
)

// Result is what a build needed.
type Result struct {
	// Downloaded is the bytes fetched into the build's module cache.
	Downloaded int64
	// Modules are the modules the program's go.sum names, sorted.
	Modules []string
	// Sources are those of them whose source the build downloaded (not
	// only their go.mod), sorted: the modules it compiles from.
	Sources []string
	// SumLines is the number of lines of the program's go.sum.
	SumLines int
	// Go is the program's go directive after the build.
	Go string
}

// Build writes main.go and a go.mod that requires each module of
// replace (module path to the directory of its go.mod in this checkout)
// at v0.0.0 and replaces it with that directory, then builds it as mode
// says with the Go that runs the test and GOTOOLCHAIN=local, so the
// program must build with that Go.
func Build(t *testing.T, mainGo string, replace map[string]string, mode Mode) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	local, err := exec.CommandContext(ctx, "go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatalf("go env GOMODCACHE: %v", err)
	}
	proxy := "file://" + filepath.ToSlash(filepath.Join(strings.TrimSpace(string(local)), "cache", "download"))

	dir := t.TempDir()
	cache := filepath.Join(t.TempDir(), "modcache")
	mod := "module example.com/program\n\ngo 1.26\n"
	known := map[string]bool{} // the repository's go.sum lines
	for _, path := range slices.Sorted(maps.Keys(replace)) {
		mod += "\nrequire " + path + " v0.0.0\n\nreplace " + path + " => " + replace[path] + "\n"
		for _, l := range lines(t, filepath.Join(replace[path], "go.sum")) {
			known[l] = true
		}
	}
	write(t, filepath.Join(dir, "go.mod"), mod)
	write(t, filepath.Join(dir, "main.go"), mainGo)

	goCmd := func(args ...string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOWORK=off", "GOROOT=",
			"GOFLAGS=-modcacherw -mod=mod", "GOMODCACHE="+cache, "GOPROXY="+proxy, "GOSUMDB=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if mode == Tidy {
		goCmd("mod", "tidy")
	}
	// -trimpath keys the build cache by module path and version, not by
	// directory, so a fresh module cache still finds what was compiled
	// before: what this measures is the download.
	goCmd("build", "-trimpath", "-o", filepath.Join(dir, "program"), ".")

	var r Result
	r.Downloaded = treeBytes(t, filepath.Join(cache, "cache", "download"))
	sum := lines(t, filepath.Join(dir, "go.sum"))
	r.SumLines = len(sum)
	for _, l := range sum {
		if !known[l] {
			t.Errorf("go.sum line %q is in none of the repository's go.sum files", l)
		}
		f := strings.Fields(l)
		if !slices.Contains(r.Modules, f[0]) {
			r.Modules = append(r.Modules, f[0])
		}
		if !strings.HasSuffix(f[1], "/go.mod") && !slices.Contains(r.Sources, f[0]) {
			r.Sources = append(r.Sources, f[0])
		}
	}
	slices.Sort(r.Modules)
	slices.Sort(r.Sources)
	for _, l := range lines(t, filepath.Join(dir, "go.mod")) {
		if v, ok := strings.CutPrefix(l, "go "); ok {
			r.Go = v
		}
	}
	return r
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// lines returns the file's non-empty lines, trimmed.
func lines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		if l := strings.TrimSpace(s.Text()); l != "" {
			out = append(out, l)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// treeBytes is the size of every file under root: for a module cache's
// download directory, the bytes fetched from the proxy.
func treeBytes(t *testing.T, root string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(root, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			n += info.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
