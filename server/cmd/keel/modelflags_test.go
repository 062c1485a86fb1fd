package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
)

// runWorker runs `keel worker` with args in the background until the
// returned function stops it.
func runWorker(t *testing.T, ctx context.Context, args ...string) (stop func()) {
	t.Helper()
	wctx, cancel := context.WithCancel(ctx)
	args = append([]string{"worker", "--nats", "", "--workspace", t.TempDir()}, args...)
	_, errOut, done := inBackground(t, ctx, "polling task queue", func(stdout, stderr io.Writer) int {
		return dispatch(wctx, args, stdout, stderr)
	})
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if code := <-done; code != exitOK {
			t.Errorf("keel worker: status %d: %s", code, errOut.String())
		}
	}
	t.Cleanup(stop)
	return stop
}

// keel worker --scripts DIR offers DIR/NAME.json as scripted:NAME, and
// the demo with no flags at all; a client naming a file instead is
// refused at send. --allow-model narrows the offer to what it matches.
func TestWorkerScriptsAndAllowModelFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	clearTemporalEnv(t)
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "")
	ctx, cancel := context.WithTimeout(withNoInput(context.Background()), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "greet.json"), []byte(`{"turns":[{"text":["Hello from ","the scripts directory."]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := keeltest.StartServer(t, devserver.Config{})
	addr := []string{"--address", srv.Address()}
	stop := runWorker(t, ctx, append(addr, "--scripts", dir)...)
	run := func(session string, args ...string) (int, string) {
		code, out, errOut := keelCmd(ctx, append(append([]string{"run", "--nats", "", "--session", session}, addr...), append(args, "hi")...)...)
		return code, out + errOut
	}
	if code, out := run("flag-named", "--model", "scripted:greet"); code != exitOK || !strings.Contains(out, "Hello from the scripts directory.") {
		t.Fatalf("scripted:greet: status %d, want 0 and the script's text:\n%s", code, out)
	}
	if code, out := run("flag-demo"); code != exitOK || !strings.Contains(out, "completed in 5 steps") {
		t.Fatalf("the default model: status %d, want 0 and the demo:\n%s", code, out)
	}
	for i, spec := range []string{"scripted:" + filepath.Join(dir, "greet.json"), "scripted:/etc/passwd", "scripted:../greet", "openai:gpt-4o"} {
		code, out := run("flag-refused-"+string(rune('a'+i)), "--model", spec)
		if code == exitOK || !strings.Contains(out, "not offered by this worker") || strings.Contains(out, "Hello from") {
			t.Fatalf("--model %s: status %d, want a refusal:\n%s", spec, code, out)
		}
	}
	stop()

	runWorker(t, ctx, append(addr, "--scripts", dir, "--allow-model", "scripted:greet")...)
	if code, out := run("allow-named", "--model", "scripted:greet"); code != exitOK {
		t.Fatalf("an allowed script: status %d:\n%s", code, out)
	}
	if code, out := run("allow-demo"); code == exitOK || !strings.Contains(out, "it offers scripted:greet") {
		t.Fatalf("the demo, which --allow-model leaves out: status %d, want a refusal naming the offer:\n%s", code, out)
	}
}

// keel dev with no flags has a scripts directory under its data
// directory, made if missing and named in its banner: a script dropped
// there runs as scripted:NAME.
func TestDevDefaultScriptsDirectory(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	clearTemporalEnv(t)
	ctx, cancel := context.WithTimeout(withNoInput(context.Background()), 3*time.Minute)
	defer cancel()
	data := filepath.Join(t.TempDir(), "data")
	devCtx, stopDev := context.WithCancel(ctx)
	out, errOut, done := inBackground(t, ctx, "Try it from another terminal", func(stdout, stderr io.Writer) int {
		return dispatch(devCtx, []string{"dev", "--data-dir", data, "--no-ui", "--port", "0", "--nats-port", "0",
			"--http-port", "0", "--metrics-address", ""}, stdout, stderr)
	})
	defer func() {
		stopDev()
		if code := <-done; code != exitOK {
			t.Errorf("keel dev: status %d: %s", code, errOut.String())
		}
	}()
	banner := out.String()
	scripts, err := filepath.Abs(filepath.Join(data, "scripts"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(banner, "scripts        "+scripts) {
		t.Fatalf("the banner does not name %s:\n%s", scripts, banner)
	}
	if err := os.WriteFile(filepath.Join(scripts, "dropped.json"), []byte(`{"turns":[{"text":["dropped in"]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	field := func(label string) string {
		for _, line := range strings.Split(banner, "\n") {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), label); ok {
				return strings.Fields(rest)[0]
			}
		}
		t.Fatalf("no %q in the banner:\n%s", label, banner)
		return ""
	}
	code, stdout, stderr := keelCmd(ctx, "run", "--address", field("Temporal gRPC"), "--nats", field("NATS (live)"),
		"--codec-endpoint", field("codec endpoint"), "--model", "scripted:dropped", "hi")
	if code != exitOK || !strings.Contains(stdout, "dropped in") {
		t.Fatalf("scripted:dropped: status %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}
