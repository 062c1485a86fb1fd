package connect_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/keelrun/keel/connect"
	"github.com/keelrun/keel/internal/syncbuf"
	"github.com/keelrun/keel/internal/testpki"
	"github.com/keelrun/keel/logging"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
)

// dial connects with o (and nothing from the environment) and checks the
// connection with a call.
func dial(t *testing.T, o connect.Options) error {
	t.Helper()
	return dialLogging(t, o, io.Discard)
}

// dialLogging is dial with the client's logs, at every level, to w.
func dialLogging(t *testing.T, o connect.Options, w io.Writer) error {
	t.Helper()
	o.IgnoreEnvironment = true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	logger := tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug})))
	c, err := connect.Dial(ctx, o, sdkclient.Options{Logger: logger})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "default"})
	return err
}

// requireCause checks that err is a *connect.DialError for cause whose
// message says the cause and the hint.
func requireCause(t *testing.T, err, cause error, hint string) {
	t.Helper()
	t.Logf("error: %v", err)
	var de *connect.DialError
	if !errors.As(err, &de) {
		t.Fatalf("error = %v (%T), want a *connect.DialError", err, err)
	}
	if !errors.Is(err, cause) {
		t.Fatalf("error = %v, want cause %q", err, cause)
	}
	if msg := err.Error(); !strings.Contains(msg, cause.Error()) || !strings.Contains(msg, hint) {
		t.Fatalf("error message %q should say %q and %q", msg, cause, hint)
	}
}

func TestTLS(t *testing.T) {
	pki := testpki.New(t)
	srv := keeltest.StartServer(t, devserver.Config{TLS: pki.ServerTLS(false)})
	addr := srv.Address()

	t.Run("with the CA", func(t *testing.T) {
		if err := dial(t, connect.Options{HostPort: addr, TLS: &connect.TLS{ServerCAFile: pki.CAFile}}); err != nil {
			t.Fatalf("dial: %v", err)
		}
	})
	t.Run("with the CA and another name of the server", func(t *testing.T) {
		err := dial(t, connect.Options{HostPort: addr,
			TLS: &connect.TLS{ServerCAFile: pki.CAFile, ServerName: testpki.TLSServerName}})
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
	})
	t.Run("without the CA", func(t *testing.T) {
		err := dial(t, connect.Options{HostPort: addr, TLS: &connect.TLS{}})
		requireCause(t, err, connect.ErrUnknownAuthority, "--tls-ca-path")
	})
	t.Run("with a name the certificate is not for", func(t *testing.T) {
		err := dial(t, connect.Options{HostPort: addr, TLS: &connect.TLS{ServerCAFile: pki.CAFile, ServerName: "other.keel.test"}})
		requireCause(t, err, connect.ErrServerName, "--tls-server-name")
	})
	t.Run("without TLS", func(t *testing.T) {
		err := dial(t, connect.Options{HostPort: addr})
		requireCause(t, err, connect.ErrTLSRequired, "--tls")
	})
}

func TestMutualTLS(t *testing.T) {
	pki := testpki.New(t)
	srv := keeltest.StartServer(t, devserver.Config{TLS: pki.ServerTLS(true)})
	addr := srv.Address()

	t.Run("with a client certificate", func(t *testing.T) {
		err := dial(t, connect.Options{HostPort: addr, TLS: &connect.TLS{ServerCAFile: pki.CAFile,
			ClientCertFile: pki.ClientCertFile, ClientKeyFile: pki.ClientKeyFile}})
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
	})
	t.Run("without a client certificate", func(t *testing.T) {
		err := dial(t, connect.Options{HostPort: addr, TLS: &connect.TLS{ServerCAFile: pki.CAFile}})
		requireCause(t, err, connect.ErrClientCertRequired, "--tls-cert-path and --tls-key-path")
	})
	t.Run("with a certificate of another CA", func(t *testing.T) {
		other := testpki.New(t)
		err := dial(t, connect.Options{HostPort: addr, TLS: &connect.TLS{ServerCAFile: pki.CAFile,
			ClientCertFile: other.ClientCertFile, ClientKeyFile: other.ClientKeyFile}})
		requireCause(t, err, connect.ErrClientCertRefused, "signed by a CA the server trusts")
	})
	t.Run("the server's own clients", func(t *testing.T) {
		c := keeltest.Dial(t, srv)
		_, err := c.WorkflowService().DescribeNamespace(context.Background(),
			&workflowservice.DescribeNamespaceRequest{Namespace: "default"})
		if err != nil {
			t.Fatalf("describe namespace: %v", err)
		}
	})
}

// authRecorder is a frontend interceptor that keeps the authorization
// headers it sees and refuses calls without the expected one.
type authRecorder struct {
	want string
	mu   sync.Mutex
	seen map[string]int
}

func (a *authRecorder) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	auth := md.Get("authorization")
	a.mu.Lock()
	for _, v := range auth {
		a.seen[v]++
	}
	a.mu.Unlock()
	// The server's own clients send none.
	if len(auth) > 0 && auth[0] != a.want {
		return nil, status.Error(codes.Unauthenticated, "bad credentials")
	}
	return h(ctx, req)
}

func TestAPIKey(t *testing.T) {
	const key = "sk-test-5ecret-api-key"
	rec := &authRecorder{want: "Bearer " + key, seen: map[string]int{}}
	pki := testpki.New(t)
	// Everything the server and the clients log goes here, to be searched
	// for the keys.
	logs := &syncbuf.Buffer{}
	srv := keeltest.StartServer(t, devserver.Config{TLS: pki.ServerTLS(false),
		FrontendInterceptors: []grpc.UnaryServerInterceptor{rec.intercept},
		Logger:               serverLogger(t, logs), LogLevel: zapcore.InfoLevel})
	t.Cleanup(func() {
		if logs.String() == "" {
			t.Error("nothing was logged, so the search for keys below proves nothing")
		}
		if strings.Contains(logs.String(), "5ecret") {
			t.Errorf("an API key appears in the logs:\n%s", logs.String())
		}
	})

	if err := dialLogging(t, connect.Options{HostPort: srv.Address(), APIKey: key, TLS: &connect.TLS{ServerCAFile: pki.CAFile}}, logs); err != nil {
		t.Fatalf("dial: %v", err)
	}
	rec.mu.Lock()
	n := rec.seen["Bearer "+key]
	rec.mu.Unlock()
	if n == 0 {
		t.Fatalf("the server saw no \"authorization: Bearer KEY\" header; saw %v", rec.seen)
	}

	t.Run("refused", func(t *testing.T) {
		const wrong = "sk-wrong-5ecret-api-key"
		err := dialLogging(t, connect.Options{HostPort: srv.Address(), APIKey: wrong, TLS: &connect.TLS{ServerCAFile: pki.CAFile}}, logs)
		requireCause(t, err, connect.ErrUnauthenticated, "TEMPORAL_API_KEY")
		if strings.Contains(err.Error(), wrong) {
			t.Fatalf("the error shows the API key: %v", err)
		}
	})
	t.Run("without TLS", func(t *testing.T) {
		err := dialLogging(t, connect.Options{HostPort: srv.Address(), APIKey: key, TLS: &connect.TLS{Disabled: true}}, logs)
		requireCause(t, err, connect.ErrTLSRequired, "--tls")
		if strings.Contains(err.Error(), key) {
			t.Fatalf("the error shows the API key: %v", err)
		}
	})
}

// serverLogger writes the server's records, at every level, to w.
func serverLogger(t *testing.T, w io.Writer) *zap.Logger {
	l, err := logging.New(logging.Options{Level: zapcore.DebugLevel, Output: w})
	if err != nil {
		t.Fatal(err)
	}
	return l
}
