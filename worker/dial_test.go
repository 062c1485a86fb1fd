package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/connect"
	"github.com/keelrun/keel/devserver"
	"github.com/keelrun/keel/internal/keeltest"
	"github.com/keelrun/keel/worker"
)

// TestDialMutualTLS runs a worker dialed with a client certificate on a
// server that requires one, and a session on it.
func TestDialMutualTLS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	pki := keeltest.NewPKI(t)
	srv := keeltest.StartServer(t, devserver.Config{TLS: pki.ServerTLS(true)})
	codec := keeltest.Codec(t, srv)

	c, opts, err := worker.Dial(ctx, connect.Options{HostPort: srv.Address(), IgnoreEnvironment: true,
		TLS: &connect.TLS{ServerCAFile: pki.CAFile, ClientCertFile: pki.ClientCertFile, ClientKeyFile: pki.ClientKeyFile}},
		worker.Options{Models: keeltest.ScriptModels(t, `{"turns":[{"text":["dialed"]}]}`), Workspace: t.TempDir(),
			Codec: codec, StopTimeout: time.Second})
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	defer c.Close()
	if opts.Namespace != "default" {
		t.Errorf("Namespace = %q, want default", opts.Namespace)
	}
	w, err := worker.New(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	kc := keeltest.Client(t, srv, nil)
	run, err := kc.Session("worker-tls").Send(ctx, "hi", client.WithConfig(api.RunConfig{Model: "scripted:any"}))
	if err != nil {
		t.Fatal(err)
	}
	out, err := run.Outcome(ctx)
	if err != nil || out.Text != "dialed" {
		t.Fatalf("outcome %+v, %v; want the script's text", out, err)
	}
}
