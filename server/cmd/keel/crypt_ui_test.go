package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
)

// chromium returns a headless Chromium, or skips the test without one;
// in CI (CI=true), where .ci/run installs it, a missing browser fails.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium-headless-shell", "chromium", "chromium-browser", "google-chrome"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no headless Chromium on PATH; .ci/run installs chromium-headless-shell")
	}
	t.Skip("no headless Chromium on PATH (apt-get install chromium-headless-shell)")
	return ""
}

// The embedded Web UI of an encrypting keel dev shows a run's prompt and
// answer in the clear, decoded through keel dev's codec endpoint, while
// Temporal holds ciphertext (TestEncryptedDev checks that).
func TestEncryptedDevWebUI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server and a browser")
	}
	browser := chromium(t)
	ctx, cancel := context.WithTimeout(withNoInput(context.Background()), 2*time.Minute)
	defer cancel()
	const (
		prompt   = "UIPROMPT-3c2b1a"
		response = "UIRESPONSE-8f7e6d"
	)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	keyFile := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keyFile, []byte("ui-1 "+base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stack, err := startDevStack(ctx, devConfig{scripts: testScripts(), uiPort: 0, workspace: t.TempDir(),
		logger: quietLogger(), logLevel: zapcore.ErrorLevel, crypt: devCryptFlags{keyFile: keyFile}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stack.stop() }()
	if stack.uiURL() == "" {
		t.Fatal("keel dev started without its Web UI")
	}
	model := writeScript(t, `{"turns":[{"text":["`+response+`"]}]}`)
	var out, errOut bytes.Buffer
	if code := dispatch(ctx, []string{"run", "--address", stack.server.Address(), "--nats", "", "--codec-endpoint", stack.codecURL,
		"--encryption-key-file", keyFile, "--session", "ui", "--model", model, "ask " + prompt}, &out, &errOut); code != exitOK {
		t.Fatalf("run: status %d\n%s\n%s", code, out.String(), errOut.String())
	}
	// The run executed in the session's workflow, in its first execution
	// (an inline session continues as new after each run): that
	// execution's history page shows the run's prompt and response.
	execution, err := firstExecution(ctx, stack.temporal, "ui")
	if err != nil {
		t.Fatal(err)
	}
	page := stack.uiURL() + "/namespaces/" + url.PathEscape(stack.server.Namespace()) + "/workflows/" +
		url.PathEscape("ui") + "/" + execution + "/history"
	cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--virtual-time-budget=20000", "--dump-dom", page)
	var dom, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &dom, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", browser, err, stderr.String())
	}
	got := dom.String()
	for _, m := range []string{prompt, response} {
		if !strings.Contains(got, m) {
			t.Errorf("the Web UI's page of the run does not show %s (%d bytes of DOM)", m, len(got))
		}
	}
}
