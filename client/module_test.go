package client_test

import (
	"bufio"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The budget of a Go service that only sends prompts: a ten-line program
// importing client and api, built in a fresh module cache. Set from the
// measurement in docs/performance.md ("The client module"): 83 MB
// downloaded, 54 modules and 132 lines in go.sum, go 1.26.0. Before the
// client had a module of its own the same program downloaded the Temporal
// server, the Web UI server and the cloud SDKs: 254 modules, 535 lines, and
// a forced Go 1.27.3.
const (
	budgetDownloadBytes = 100 << 20
	budgetModules       = 60
	budgetSumLines      = 150
)

// Modules the client must never bring in, whatever the budget says.
var heavyModules = []string{
	"go.temporal.io/server",
	"github.com/temporalio/ui-server",
	"gocloud.dev",
	"github.com/aws/",
	"cloud.google.com/",
	"github.com/chromedp/",
	"github.com/johannesboyne/gofakes3",
	"github.com/anthropics/",
	"github.com/openai/",
	"github.com/labstack/echo",
}

const clientOnlyProgram = `// A service that only sends prompts to keel.
package main

import (
	"context"
	"fmt"
	"log"

	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
)

func main() {
	ctx := context.Background()
	c, err := client.Dial(ctx, client.Options{HostPort: "localhost:7233"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	run, err := c.Session("demo").Send(ctx, "hello")
	if err != nil {
		log.Fatal(err)
	}
	out, err := run.Outcome(ctx)
	fmt.Println(out.Text, err, api.MaxPromptBytes)
}
`

// TestClientOnlyBuildStaysSmall builds the program above against this
// checkout with the Go installed here (GOTOOLCHAIN=local: the client must
// not force a newer Go on its users) and a module cache of its own, so
// every byte it needs is downloaded from the module proxy, and holds the
// result to the budget.
func TestClientOnlyBuildStaysSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("downloads the client's dependencies from the module proxy")
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cache := filepath.Join(t.TempDir(), "modcache")
	write(t, filepath.Join(dir, "main.go"), clientOnlyProgram)
	write(t, filepath.Join(dir, "go.mod"), "module example.com/prompts\n\ngo 1.26\n\n"+
		"require github.com/keelrun/keel v0.0.0\n\nreplace github.com/keelrun/keel => "+repo+"\n")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	goCmd := func(args ...string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOWORK=off", "GOFLAGS=-modcacherw",
			"GOMODCACHE="+cache, "GOROOT=")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	goCmd("mod", "tidy")
	goCmd("build", "-o", filepath.Join(dir, "prompts"), ".")

	downloaded := treeBytes(t, filepath.Join(cache, "cache", "download"))
	sum := readLines(t, filepath.Join(dir, "go.sum"))
	modules := map[string]bool{}
	for _, l := range sum {
		modules[strings.Fields(l)[0]] = true
	}
	goLine := ""
	for _, l := range readLines(t, filepath.Join(dir, "go.mod")) {
		if v, ok := strings.CutPrefix(l, "go "); ok {
			goLine = v
		}
	}
	t.Logf("client-only build: %.1f MB downloaded, %d modules, %d go.sum lines, go %s",
		float64(downloaded)/(1<<20), len(modules), len(sum), goLine)

	if downloaded > budgetDownloadBytes {
		t.Errorf("downloaded %d bytes, over the budget of %d", downloaded, budgetDownloadBytes)
	}
	if len(modules) > budgetModules {
		t.Errorf("go.sum names %d modules, over the budget of %d", len(modules), budgetModules)
	}
	if len(sum) > budgetSumLines {
		t.Errorf("go.sum has %d lines, over the budget of %d", len(sum), budgetSumLines)
	}
	for m := range modules {
		for _, heavy := range heavyModules {
			if strings.HasPrefix(m, heavy) {
				t.Errorf("the client-only build needs %s", m)
			}
		}
	}
	if goLine != "1.26" && goLine != "1.26.0" {
		t.Errorf("the program's go.mod says go %s after tidy; the client asks for Go 1.26.0, the Temporal SDK's minimum", goLine)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		if l := strings.TrimSpace(s.Text()); l != "" {
			lines = append(lines, l)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
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
