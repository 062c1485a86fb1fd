package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap/zapcore"
)

// keel dev with encryption on streams deltas encrypted: a raw NATS
// subscriber holding keel dev's own credentials captures no prompt and no
// streamed text, while `keel run` streams them with the key file, and
// without it through the codec endpoint. A client without credentials
// cannot even connect; `keel run` with no NATS flag finds keel dev's.
func TestEncryptedDevStreamsDeltas(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	ctx, cancel := context.WithTimeout(withNoInput(context.Background()), 2*time.Minute)
	defer cancel()
	const (
		prompt   = "PROMPT-5c2d9e"
		streamed = "STREAMED-a81f03"
		final    = "FINAL-0b7c44"
	)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	keyFile := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keyFile, []byte("live-1 "+base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stack, err := startDevStack(ctx, devConfig{scripts: testScripts(), dataDir: t.TempDir(), noUI: true, workspace: t.TempDir(),
		logger: quietLogger(), logLevel: zapcore.ErrorLevel, crypt: devCryptFlags{keyFile: keyFile}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stack.stop() }()
	natsURL := stack.nats.ClientURL()

	if nc, err := nats.Connect(natsURL, nats.Timeout(5*time.Second)); !errors.Is(err, nats.ErrAuthorization) {
		if err == nil {
			nc.Close()
		}
		t.Fatalf("a client without credentials: %v, want an authorization violation", err)
	}
	tap, err := nats.Connect(natsURL, stack.natsLogin.option())
	if err != nil {
		t.Fatal(err)
	}
	defer tap.Close()
	var mu sync.Mutex
	var wire bytes.Buffer
	if _, err := tap.Subscribe(">", func(m *nats.Msg) {
		mu.Lock()
		defer mu.Unlock()
		wire.Write(m.Data)
		for k, v := range m.Header {
			wire.WriteString(k + strings.Join(v, " "))
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := tap.Flush(); err != nil {
		t.Fatal(err)
	}

	// The first step's text is streamed only: the durable log keeps the
	// last step's.
	model := writeScript(t, `{"turns":[{"text":["`+streamed+`"],"tool_calls":[{"id":"l","name":"list_files","arguments":{"path":"."}}]},{"text":["`+final+`"]}]}`)
	for name, flags := range map[string][]string{
		"with the key file":          {"--encryption-key-file", keyFile},
		"through the codec endpoint": {"--encryption-key-file", ""},
	} {
		var out, errOut bytes.Buffer
		args := append([]string{"run", "--address", stack.server.Address(), "--nats", natsURL, "--codec-endpoint", stack.codecURL,
			"--model", model, "--tools", "list_files"}, flags...)
		if code := dispatch(ctx, append(args, "say "+prompt), &out, &errOut); code != exitOK {
			t.Fatalf("run %s: status %d\n%s\n%s", name, code, out.String(), errOut.String())
		}
		if !strings.Contains(out.String(), streamed) || !strings.Contains(out.String(), final) {
			t.Errorf("run %s did not stream the first step's text:\n%s", name, out.String())
		}
		if strings.Contains(errOut.String(), "warning") {
			t.Errorf("run %s warned: %s", name, errOut.String())
		}
	}
	if err := tap.Flush(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if wire.Len() == 0 {
		t.Fatal("the tap captured nothing: the test proves nothing")
	}
	for _, m := range []string{prompt, streamed, final, `"text"`} {
		if bytes.Contains(wire.Bytes(), []byte(m)) {
			t.Errorf("NATS carried %s in the clear", m)
		}
	}
}
