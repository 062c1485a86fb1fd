package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"

	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/server/internal/keeltest"
)

// keel dev --postgres keeps the server's data in PostgreSQL: a run
// completes, and a bad URL is a usage error that does not echo the
// password.
func TestDevOnPostgres(t *testing.T) {
	code, _, stderr := call(t, "dev", "--postgres", "mysql://keel:hunter2@db/x")
	if code != exitUsage || !strings.Contains(stderr, "--postgres") || strings.Contains(stderr, "hunter2") {
		t.Fatalf("bad --postgres: exit %d, stderr %q", code, stderr)
	}
	pg := keeltest.Postgres(t)
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	ctx, cancel := context.WithTimeout(withNoInput(context.Background()), 3*time.Minute)
	defer cancel()
	stack, err := startDevStack(ctx, devConfig{scripts: testScripts(), postgres: pg, noUI: true, workspace: t.TempDir(),
		logger: quietLogger(), logLevel: zapcore.ErrorLevel})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := stack.stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	}()
	if got := stack.server.Config().Postgres; got == nil || got.Database != pg.Database {
		t.Fatalf("the server runs on %+v, want PostgreSQL database %s", got, pg.Database)
	}
	c, err := client.Dial(ctx, client.Options{HostPort: stack.server.Address(), DataConverter: stack.dc,
		Config: api.RunConfig{Model: writeScript(t, `{"turns":[{"text":["on ","postgres"]}]}`)}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	run, err := c.Session("dev-postgres").Send(ctx, "hi")
	if err != nil {
		t.Fatal(err)
	}
	out, err := run.Outcome(ctx)
	if err != nil || out.Text != "on postgres" {
		t.Fatalf("outcome %q, %v", out.Text, err)
	}
}
