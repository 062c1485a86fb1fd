package client_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keelrun/keel/internal/modtest"
)

// The budget of a Go service that only sends prompts: a ten-line program
// importing client and api, built in a fresh module cache. Set from the
// measurement in docs/ARCHITECTURE.md ("Modules"): 75.1 MiB downloaded,
// 49 modules and 122 lines in go.sum, go 1.26.0. While live's tests still
// brought the NATS server into the root module's graph, the same program
// took 79.5 MiB, 54 modules and 132 lines; before the client had a module
// of its own it downloaded the Temporal server, the Web UI server and the
// cloud SDKs: 254 modules, 535 lines, and a forced Go 1.27.3.
const (
	budgetDownloadBytes = 80 << 20
	budgetModules       = 53
	budgetSumLines      = 130
)

// Modules the client must never bring in, whatever the budget says.
var heavyModules = []string{
	"go.temporal.io/server",
	"github.com/temporalio/ui-server",
	"github.com/nats-io/nats-server",
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
// checkout, requiring the root module alone, with the Go installed here
// (the client must not force a newer Go on its users) and a module cache
// of its own (internal/modtest), and holds the result to the budget.
func TestClientOnlyBuildStaysSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program in a module cache of its own")
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	r := modtest.Build(t, clientOnlyProgram, map[string]string{"github.com/keelrun/keel": repo}, modtest.Tidy)
	t.Logf("client-only build: %.1f MiB downloaded, %d modules, %d go.sum lines, go %s",
		float64(r.Downloaded)/(1<<20), len(r.Modules), r.SumLines, r.Go)

	if r.Downloaded > budgetDownloadBytes {
		t.Errorf("downloaded %d bytes, over the budget of %d", r.Downloaded, budgetDownloadBytes)
	}
	if len(r.Modules) > budgetModules {
		t.Errorf("go.sum names %d modules, over the budget of %d", len(r.Modules), budgetModules)
	}
	if r.SumLines > budgetSumLines {
		t.Errorf("go.sum has %d lines, over the budget of %d", r.SumLines, budgetSumLines)
	}
	for _, m := range r.Modules {
		for _, heavy := range heavyModules {
			if strings.HasPrefix(m, heavy) {
				t.Errorf("the client-only build needs %s", m)
			}
		}
	}
	// The server module requires the root; never the other way round.
	if mod, err := os.ReadFile("../go.mod"); err != nil || strings.Contains(string(mod), "github.com/keelrun/keel/server") {
		t.Errorf("the root module requires the server module (or its go.mod is unreadable: %v)", err)
	}
	if r.Go != "1.26" && r.Go != "1.26.0" {
		t.Errorf("the program's go.mod says go %s after tidy; the client asks for Go 1.26.0, the Temporal SDK's minimum", r.Go)
	}
}
