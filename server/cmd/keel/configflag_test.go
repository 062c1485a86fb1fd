package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
)

// keel worker and keel dev refuse a bad keel.yaml before they start
// anything, naming the file, line and field, and never echo a key.
func TestConfigRefusedAtStart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "keel.yaml")
	bad := "models:\n  gpt:\n    provider: openai\n    model: gpt-4.1\n    api_key: sk-live-abcdef0123456789\nlimits:\n  max_steps: 0\n"
	if err := os.WriteFile(file, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		// --address points nowhere: the file is refused before any dial.
		{"worker", "--config", file, "--address", "127.0.0.1:1"},
		{"dev", "--config", file, "--data-dir", filepath.Join(t.TempDir(), "data")},
	} {
		t.Run(args[0], func(t *testing.T) {
			code, stdout, stderr := call(t, args...)
			if code != exitFailed {
				t.Errorf("exit status %d, want %d", code, exitFailed)
			}
			for _, want := range []string{
				file + ":5:5: models.gpt.api_key: keys and secrets never go in the configuration file",
				file + ":7:14: limits.max_steps: must be at least 1, got 0",
			} {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr %q does not contain %q", stderr, want)
				}
			}
			if strings.Contains(stderr+stdout, "sk-live") {
				t.Error("the key was echoed")
			}
		})
	}
}

// keel worker --config with a good file: `keel run --model default` runs on
// the file's default model (a script beside the file), and a name the file
// does not define is an error the run reports.
func TestWorkerWithConfigFile(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	clearTemporalEnv(t)
	ctx, cancel := context.WithTimeout(withNoInput(context.Background()), 2*time.Minute)
	defer cancel()
	srv := startWorkerWithConfig(t, ctx, map[string]string{
		"greeting.json": `{"turns":[{"text":["Hello from ","the file."],"usage":{"input_tokens":3,"output_tokens":4}}]}`,
		"keel.yaml":     "models:\n  greeter:\n    provider: scripted\n    model: greeting.json\ndefault_model: greeter\nworkspace: ./ws\n",
	})

	for _, model := range []string{"default", "greeter"} {
		code, out, errOut := keelCmd(ctx, "run", "--address", srv.Address(), "--nats", "", "--model", model, "--tools", "", "hi")
		if code != exitOK || !strings.Contains(out, "Hello from the file.") {
			t.Fatalf("--model %s: status %d, want 0 and the file's script\nstdout:\n%s\nstderr:\n%s", model, code, out, errOut)
		}
	}
	code, out, errOut := keelCmd(ctx, "run", "--address", srv.Address(), "--nats", "", "--model", "nobody", "--tools", "", "hi")
	// Refused at send, listing the file's models (and never repeating the
	// name sent).
	if code != exitFailed || !strings.Contains(out+errOut, "not offered by this worker; it offers default, greeter") {
		t.Fatalf("--model nobody: status %d, want %d and the worker's models\nstdout:\n%s\nstderr:\n%s", code, exitFailed, out, errOut)
	}
}

// startWorkerWithConfig writes files (a keel.yaml and what it names) to a
// directory of the test's and starts a Temporal server and a `keel worker
// --config` of that keel.yaml against it.
func startWorkerWithConfig(t *testing.T, ctx context.Context, files map[string]string) *devserver.Server {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	srv := keeltest.StartServer(t, devserver.Config{})
	startKeelWorker(t, ctx, "--address", srv.Address(), "--config", filepath.Join(dir, "keel.yaml"))
	return srv
}
