package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// What only `keel dev` runs, and what exists only for benchmarks and
// tests: none of it may be linked into the production build.
var notInProduction = []string{
	"github.com/keelrun/keel/server/devserver",
	"github.com/keelrun/keel/server/natsserver",
	"github.com/keelrun/keel/server/bench",
	"github.com/keelrun/keel/server/internal/keeltest",
	"go.temporal.io/server/",
	"github.com/temporalio/ui-server/",
	"github.com/nats-io/nats-server/",
	"github.com/johannesboyne/gofakes3",
	"github.com/chromedp/",
}

// TestProductionBuildLeavesOutTheEmbeddedStack builds keel with -tags
// nodev, the binary of a production worker or gateway (the Dockerfile's):
// it links none of the embedded Temporal server, Web UI or NATS server,
// and its `keel dev` says which build to use instead.
func TestProductionBuildLeavesOutTheEmbeddedStack(t *testing.T) {
	out, err := exec.Command("go", "list", "-tags", "nodev", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	for _, d := range deps {
		for _, banned := range notInProduction {
			if d == banned || strings.HasPrefix(d, banned) || strings.HasPrefix(d, banned+"/") {
				t.Errorf("the production build links %s", d)
			}
		}
	}
	full, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, full)
	}
	if !strings.Contains(string(full), "github.com/keelrun/keel/server/devserver\n") {
		t.Fatal("the default build no longer links devserver: keel dev would have nothing to run")
	}

	bin := filepath.Join(t.TempDir(), "keel")
	if out, err := exec.Command("go", "build", "-tags", "nodev", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build -tags nodev: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "dev")
	msg, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != exitFailed {
		t.Fatalf("keel dev of the production build: exit %d (%v), want %d\n%s", code, err, exitFailed, msg)
	}
	if !strings.Contains(string(msg), "production build") {
		t.Errorf("keel dev of the production build says %q, want it to name the build", msg)
	}
	help, _ := exec.Command(bin, "help").CombinedOutput()
	for _, c := range []string{"worker", "serve", "run"} {
		if !strings.Contains(string(help), "  "+c+" ") {
			t.Errorf("the production build's help lists no %q:\n%s", c, help)
		}
	}
}
