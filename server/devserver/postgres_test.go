package devserver_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	pgschema "go.temporal.io/server/schema/postgresql/v12"

	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
)

func TestParsePostgresURL(t *testing.T) {
	got, err := devserver.ParsePostgresURL("postgres://keel:s%40cret@db.example:6432/temporal?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	want := &devserver.Postgres{Address: "db.example:6432", User: "keel", Password: "s@cret",
		Database: "temporal", VisibilityDatabase: "temporal_visibility",
		ConnectAttributes: map[string]string{"sslmode": "disable"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	got, err = devserver.ParsePostgresURL("postgresql://keel@localhost")
	if err != nil {
		t.Fatal(err)
	}
	if got.Address != "localhost:5432" || got.Database != devserver.DefaultPostgresDatabase {
		t.Errorf("defaults: address %q, database %q", got.Address, got.Database)
	}
	for _, bad := range []string{"mysql://keel@localhost/x", "postgres://localhost/x", "postgres://keel:pw@[::1/x"} {
		_, err := devserver.ParsePostgresURL(bad)
		if !errors.Is(err, devserver.ErrPostgresURL) {
			t.Errorf("%q: got %v, want ErrPostgresURL", bad, err)
		}
	}
	// The password never shows in an error.
	if _, err := devserver.ParsePostgresURL("postgres://keel:hunter2@[::1/x"); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error %v", err)
	}
	_, err = devserver.Start(context.Background(), devserver.Config{DataDir: t.TempDir(), Postgres: got})
	if err == nil {
		t.Error("DataDir and Postgres together were accepted")
	}
}

// TestPostgresServer starts the embedded server on two fresh PostgreSQL
// databases, which it creates and brings to the schema version of the
// server module, keeps a workflow waiting across a restart (the second
// start finds the schema current and the namespace there), and finds the
// workflow by keel's search attributes in PostgreSQL visibility.
func TestPostgresServer(t *testing.T) {
	pg := keeltest.Postgres(t)
	if testing.Short() {
		t.Skip("starts Temporal servers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv := keeltest.StartServer(t, devserver.Config{Postgres: pg})

	for db, want := range map[string]string{pg.Database: pgschema.Version, pg.VisibilityDatabase: pgschema.VisibilityVersion} {
		conn, err := keeltest.PostgresConn(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		err = conn.QueryRow(ctx, "SELECT curr_version FROM schema_version WHERE db_name = $1", db).Scan(&got)
		_ = conn.Close(ctx)
		if err != nil || got != want {
			t.Fatalf("database %s: schema version %q (%v), want %q", db, got, err, want)
		}
	}

	const tq = "postgres-test"
	start := func(c client.Client) worker.Worker {
		w := worker.New(c, tq, worker.Options{})
		w.RegisterWorkflowWithOptions(func(ctx workflow.Context) error {
			if err := workflow.UpsertTypedSearchAttributes(ctx, api.AttrSessionID.ValueSet("pg-session")); err != nil {
				return err
			}
			workflow.GetSignalChannel(ctx, "go").Receive(ctx, nil)
			return nil
		}, workflow.RegisterOptions{Name: "waits"})
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		return w
	}
	c, err := srv.Dial(ctx, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := start(c)
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "pg-waits", TaskQueue: tq}, "waits")
	if err != nil {
		t.Fatal(err)
	}
	w.Stop()
	c.Close()

	cfg := srv.Config()
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	srv, err = devserver.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("restart on the same databases: %v", err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	c, err = srv.Dial(ctx, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	defer start(c).Stop()
	if err := c.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), "go", nil); err != nil {
		t.Fatalf("signal the workflow started before the restart: %v", err)
	}
	if err := c.GetWorkflow(ctx, run.GetID(), run.GetRunID()).Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: `KeelSessionID = "pg-session" AND ExecutionStatus = "Completed"`})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetExecutions()) == 1 {
			break
		}
		// Visibility is written after the close, asynchronously; there is
		// no event to wait on from a client.
		select {
		case <-ctx.Done():
			t.Fatal("the completed workflow never showed in visibility")
		case <-time.After(50 * time.Millisecond):
		}
	}
}
