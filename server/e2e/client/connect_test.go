package client_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/connect"
	"github.com/keelrun/keel/internal/testpki"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
	"github.com/keelrun/keel/server/store"
)

// TestDialMutualTLS runs a session through a server that requires client
// certificates, with a client that dials it by Options.TLS.
func TestDialMutualTLS(t *testing.T) {
	ctx := testCtx(t)
	pki := testpki.New(t)
	srv := keeltest.StartServer(t, devserver.Config{TLS: pki.ServerTLS(true)})
	keeltest.StartWorker(t, srv, keeltest.WorkerOptions{Script: `{"turns":[{"text":["Over ", "TLS."]}]}`})
	dc := store.NewDataConverter(keeltest.Codec(t, srv))

	c, err := client.Dial(ctx, client.Options{HostPort: srv.Address(), IgnoreEnvironment: true, DataConverter: dc,
		TLS: &connect.TLS{ServerCAFile: pki.CAFile, ClientCertFile: pki.ClientCertFile, ClientKeyFile: pki.ClientKeyFile}})
	require.NoError(t, err)
	defer c.Close()
	require.Equal(t, "default", c.Namespace())
	run, err := c.Session("tls-1").Send(ctx, "hello", client.WithConfig(api.RunConfig{Model: api.DefaultModel}))
	require.NoError(t, err)
	out, err := run.Outcome(ctx)
	require.NoError(t, err)
	require.Equal(t, "Over TLS.", out.Text)

	// Without the certificate: a *connect.DialError that names the cause.
	_, err = client.Dial(ctx, client.Options{HostPort: srv.Address(), IgnoreEnvironment: true,
		TLS: &connect.TLS{ServerCAFile: pki.CAFile}})
	var de *connect.DialError
	require.True(t, errors.As(err, &de), "error %v is not a *connect.DialError", err)
	require.ErrorIs(t, err, connect.ErrClientCertRequired)
}
