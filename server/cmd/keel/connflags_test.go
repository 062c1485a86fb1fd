package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/keelrun/keel/internal/testpki"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
)

const connScript = `{"turns":[{"text":["Reached ", "you."],"usage":{"input_tokens":3,"output_tokens":2}}]}`

// clearTemporalEnv unsets what an operator's environment could bring in,
// for the duration of the test.
func clearTemporalEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "TEMPORAL_") {
			t.Setenv(name, "")
			os.Unsetenv(name)
		}
	}
	// No user's temporal.toml either.
	t.Setenv("TEMPORAL_CONFIG_FILE", filepath.Join(t.TempDir(), "none.toml"))
}

// keelCmd runs a keel command and returns its exit status and output.
func keelCmd(ctx context.Context, args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = dispatch(ctx, args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// startKeelWorker runs `keel worker` with args until the test ends.
func startKeelWorker(t *testing.T, ctx context.Context, args ...string) {
	t.Helper()
	wctx, cancel := context.WithCancel(ctx)
	args = append([]string{"worker", "--nats", "", "--workspace", t.TempDir(), "--scripts", testScripts()}, args...)
	_, errOut, done := inBackground(t, ctx, "polling task queue", func(stdout, stderr io.Writer) int {
		return dispatch(wctx, args, stdout, stderr)
	})
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != exitOK {
			t.Errorf("keel worker: status %d: %s", code, errOut.String())
		}
	})
}

// TestConnectMutualTLS runs a session through a server that requires
// client certificates, with `keel worker` and `keel run` connecting by flags
// and by Temporal's environment variables, and checks what a client without
// a certificate, or without the CA, is told.
func TestConnectMutualTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	clearTemporalEnv(t)
	ctx, cancel := context.WithTimeout(withNoInput(context.Background()), 2*time.Minute)
	defer cancel()
	pki := testpki.New(t)
	srv := keeltest.StartServer(t, devserver.Config{TLS: pki.ServerTLS(true)})
	tlsFlags := []string{"--address", srv.Address(), "--tls-ca-path", pki.CAFile,
		"--tls-cert-path", pki.ClientCertFile, "--tls-key-path", pki.ClientKeyFile}
	startKeelWorker(t, ctx, tlsFlags...)
	model := writeScript(t, connScript)

	t.Run("run with flags", func(t *testing.T) {
		code, out, errOut := keelCmd(ctx, append([]string{"run", "--nats", "", "--model", model, "--session", "mtls-flags"},
			append(tlsFlags, "hello")...)...)
		if code != exitOK || !strings.Contains(out, "Reached you.") || !strings.Contains(out, "completed") {
			t.Fatalf("status %d, want 0 and the run's text\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
		}
	})
	t.Run("run with the environment", func(t *testing.T) {
		t.Setenv("TEMPORAL_ADDRESS", srv.Address())
		t.Setenv("TEMPORAL_TLS_SERVER_CA_CERT_PATH", pki.CAFile)
		t.Setenv("TEMPORAL_TLS_CLIENT_CERT_PATH", pki.ClientCertFile)
		t.Setenv("TEMPORAL_TLS_CLIENT_KEY_PATH", pki.ClientKeyFile)
		code, out, errOut := keelCmd(ctx, "run", "--nats", "", "--model", model, "--session", "mtls-env", "hello")
		if code != exitOK || !strings.Contains(out, "Reached you.") {
			t.Fatalf("status %d, want 0 and the run's text\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
		}
	})
	t.Run("no client certificate", func(t *testing.T) {
		code, out, errOut := keelCmd(ctx, "state", "--address", srv.Address(), "--tls-ca-path", pki.CAFile, "mtls-flags")
		if code != exitFailed {
			t.Fatalf("status %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitFailed, out, errOut)
		}
		for _, want := range []string{"keel state: connect to Temporal at " + srv.Address(),
			"the server requires a client certificate", "--tls-cert-path and --tls-key-path",
			"TEMPORAL_TLS_CLIENT_CERT_PATH"} {
			if !strings.Contains(errOut, want) {
				t.Errorf("stderr lacks %q:\n%s", want, errOut)
			}
		}
		if strings.Contains(errOut, "Is a server running there?") {
			t.Errorf("stderr guesses at a missing server when the cause is known:\n%s", errOut)
		}
	})
	t.Run("no CA", func(t *testing.T) {
		code, _, errOut := keelCmd(ctx, "state", "--address", srv.Address(), "--tls",
			"--tls-cert-path", pki.ClientCertFile, "--tls-key-path", pki.ClientKeyFile, "mtls-flags")
		if code != exitFailed || !strings.Contains(errOut, "not signed by a CA this client trusts") ||
			!strings.Contains(errOut, "--tls-ca-path") {
			t.Fatalf("status %d, want %d and a hint at --tls-ca-path:\n%s", code, exitFailed, errOut)
		}
	})
	t.Run("TLS turned off", func(t *testing.T) {
		t.Setenv("TEMPORAL_TLS_SERVER_CA_CERT_PATH", pki.CAFile)
		code, _, errOut := keelCmd(ctx, "state", "--address", srv.Address(), "--tls=false", "mtls-flags")
		if code != exitFailed || !strings.Contains(errOut, "the server speaks TLS and this client does not") {
			t.Fatalf("status %d, want %d and the cause:\n%s", code, exitFailed, errOut)
		}
	})
}

// TestConnectAPIKey checks that `keel run` sends the API key as a bearer
// token, and that no output, success or failure, shows it.
func TestConnectAPIKey(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	clearTemporalEnv(t)
	ctx, cancel := context.WithTimeout(withNoInput(context.Background()), 2*time.Minute)
	defer cancel()
	const key = "tk-cli-5ecret-key"
	var mu sync.Mutex
	seen := map[string]int{}
	record := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		mu.Lock()
		for _, v := range md.Get("authorization") {
			seen[v]++
		}
		mu.Unlock()
		return h(ctx, req)
	}
	pki := testpki.New(t)
	srv := keeltest.StartServer(t, devserver.Config{TLS: pki.ServerTLS(false),
		FrontendInterceptors: []grpc.UnaryServerInterceptor{record}})
	startKeelWorker(t, ctx, "--address", srv.Address(), "--tls-ca-path", pki.CAFile)

	t.Setenv("TEMPORAL_API_KEY", key)
	code, out, errOut := keelCmd(ctx, "run", "--nats", "", "--address", srv.Address(), "--tls-ca-path", pki.CAFile,
		"--model", writeScript(t, connScript), "--session", "api-key", "hello")
	if code != exitOK {
		t.Fatalf("status %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	mu.Lock()
	n := seen["Bearer "+key]
	mu.Unlock()
	if n == 0 {
		t.Errorf("the server saw no \"authorization: Bearer KEY\" header from keel run")
	}
	if strings.Contains(out+errOut, key) {
		t.Errorf("keel run shows the API key:\n%s%s", out, errOut)
	}

	// Without the CA the key still goes nowhere near the output.
	code, out, errOut = keelCmd(ctx, "state", "--address", srv.Address(), "--api-key", key, "api-key")
	if code != exitFailed || strings.Contains(out+errOut, key) {
		t.Fatalf("status %d, want %d, and no key in:\n%s%s", code, exitFailed, out, errOut)
	}
}

// TestConnectEnvironmentAndProfile checks the order: flags, then
// TEMPORAL_* variables, then the profile of Temporal's configuration file.
func TestConnectEnvironmentAndProfile(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	clearTemporalEnv(t)
	ctx, cancel := context.WithTimeout(withNoInput(context.Background()), 2*time.Minute)
	defer cancel()
	srv := keeltest.StartServer(t, devserver.Config{})
	keeltest.StartWorker(t, srv, keeltest.WorkerOptions{Script: connScript})
	file := filepath.Join(t.TempDir(), "temporal.toml")
	profiles := `
[profile.keel]
address = "` + srv.Address() + `"
namespace = "from-profile"
`
	if err := os.WriteFile(file, []byte(profiles), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TEMPORAL_CONFIG_FILE", file)
	t.Setenv("TEMPORAL_PROFILE", "keel")
	n := 0
	run := func(args ...string) (int, string) {
		n++
		args = append(append([]string{"run", "--nats", "", "--session", "env-" + string(rune('a'+n))}, args...), "hello")
		code, out, errOut := keelCmd(ctx, args...)
		return code, out + errOut
	}

	// The profile's address and namespace (which does not exist).
	if code, out := run(); code != exitFailed || !strings.Contains(out, "from-profile") {
		t.Fatalf("with the profile's namespace: status %d, want %d and the namespace named:\n%s", code, exitFailed, out)
	}
	// The environment over the profile.
	t.Setenv("TEMPORAL_NAMESPACE", "default")
	if code, out := run(); code != exitOK || !strings.Contains(out, "Reached you.") {
		t.Fatalf("with TEMPORAL_NAMESPACE: status %d, want 0:\n%s", code, out)
	}
	t.Setenv("TEMPORAL_NAMESPACE", "from-env")
	if code, out := run(); code != exitFailed || !strings.Contains(out, "from-env") {
		t.Fatalf("with TEMPORAL_NAMESPACE=from-env: status %d, want %d and the namespace named:\n%s", code, exitFailed, out)
	}
	// Flags over the environment.
	if code, out := run("--namespace", "default"); code != exitOK {
		t.Fatalf("with --namespace: status %d, want 0:\n%s", code, out)
	}
	// TEMPORAL_ADDRESS, with no profile at all.
	t.Setenv("TEMPORAL_CONFIG_FILE", filepath.Join(t.TempDir(), "none.toml"))
	t.Setenv("TEMPORAL_PROFILE", "")
	t.Setenv("TEMPORAL_NAMESPACE", "")
	t.Setenv("TEMPORAL_ADDRESS", srv.Address())
	if code, out := run(); code != exitOK {
		t.Fatalf("with TEMPORAL_ADDRESS: status %d, want 0:\n%s", code, out)
	}
	// --profile names a profile that must exist.
	if code, out := run("--profile", "nope", "--config-file", file); code != exitFailed || !strings.Contains(out, "nope") {
		t.Fatalf("with a missing profile: status %d, want %d and the profile named:\n%s", code, exitFailed, out)
	}
}
