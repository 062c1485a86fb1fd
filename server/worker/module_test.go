package worker_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keelrun/keel/internal/modtest"
)

// What a worker program must not compile: `keel dev`'s embedded stack and
// the test kits.
var devOnlyModules = []string{
	"go.temporal.io/server",
	"github.com/temporalio/ui-server",
	"github.com/nats-io/nats-server",
	"github.com/chromedp/",
	"github.com/johannesboyne/gofakes3",
}

// TestOutsideWorkerBuilds builds the worker of the README's "Write a
// tool", its first Go block, as a user would: in a module of its own
// outside the repository, with one replace for each of keel's two modules
// and a module cache of its own (internal/modtest).
func TestOutsideWorkerBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program in a module cache of its own")
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(readme), "\n## Write a tool\n")
	section, _, _ = strings.Cut(section, "\n## ")
	_, program, ok := strings.Cut(section, "```go\n")
	program, _, ok2 := strings.Cut(program, "```")
	if !ok || !ok2 {
		t.Fatal(`README.md's "Write a tool" has no Go block`)
	}
	server, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	// Built as after go get: go mod tidy would also fetch what the
	// dependencies' tests import, among it a module version no build of
	// keel needs (gopkg.in/yaml.v2 v2.2.8, under anthropic-sdk-go's
	// tests), which this machine's module cache need not hold.
	r := modtest.Build(t, program, map[string]string{
		"github.com/keelrun/keel":        filepath.Dir(server),
		"github.com/keelrun/keel/server": server,
	}, modtest.BuildOnly)
	t.Logf("outside worker build: %.1f MiB downloaded, %d modules (%d compiled from), %d go.sum lines, go %s",
		float64(r.Downloaded)/(1<<20), len(r.Modules), len(r.Sources), r.SumLines, r.Go)
	for _, m := range r.Sources {
		for _, dev := range devOnlyModules {
			if strings.HasPrefix(m, dev) {
				t.Errorf("the worker compiles %s", m)
			}
		}
	}
}
