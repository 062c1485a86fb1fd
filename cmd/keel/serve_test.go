package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/keelrun/keel"
)

// keel serve will not listen where other machines reach it without keys,
// and says how to give them; it checks before connecting to anything.
func TestServeRefusesOpenListenerWithoutKeys(t *testing.T) {
	t.Setenv("KEEL_API_KEYS", "")
	code, _, stderr := call(t, "serve", "--address", closedAddress(t), "--listen", "0.0.0.0:0")
	if code != exitFailed || !strings.Contains(stderr, "without API keys") || !strings.Contains(stderr, "--api-key-file") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = call(t, "serve", "--listen", "nowhere")
	if code != exitFailed || !strings.Contains(stderr, "nowhere") {
		t.Fatalf("bad --listen: exit %d, stderr %q", code, stderr)
	}
}

// keel dev serves the HTTP API beside its codec endpoint, and keel serve
// serves it against the same server with API keys: a prompt sent to one
// streams to its end through the other.
func TestServeAndDevGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	ctx, cancel := context.WithTimeout(withNoInput(context.Background()), 3*time.Minute)
	defer cancel()
	stack, err := startDevStack(ctx, devConfig{noUI: true, workspace: t.TempDir(), logger: quietLogger(), logLevel: slog.LevelError})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := stack.stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	}()
	script := writeScript(t, `{"chunk_delay":"5ms","turns":[{"text":["through ","the ","gateway"]}]}`)
	devAPI := stack.gatewayURL()
	resp := httpDo(t, ctx, http.MethodPost, devAPI+"/sessions/serve-e2e/runs", "", `{"prompt":"hi","model":"`+script+`","tools":[]}`)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("keel dev's API: POST runs: %d %s", resp.StatusCode, readAll(t, resp))
	}
	resp.Body.Close()
	// The codec endpoint is still there.
	codec := httpDo(t, ctx, http.MethodPost, stack.codecURL+"/decode", "", `{"payloads":[]}`)
	if codec.StatusCode != http.StatusOK {
		t.Fatalf("codec endpoint: %d %s", codec.StatusCode, readAll(t, codec))
	}
	codec.Body.Close()

	const key = "serve-test-key-0123456789"
	keyFile := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	serveCtx, interrupt := context.WithCancel(ctx)
	defer interrupt()
	out, errOut, done := inBackground(t, ctx, "keel serve is up.", func(stdout, stderr io.Writer) int {
		return cmdServe(serveCtx, []string{"--address", stack.server.Address(), "--nats", stack.nats.ClientURL(),
			"--codec-endpoint", stack.codecURL, "--http-port", "0", "--api-key-file", keyFile}, stdout, stderr)
	})
	m := regexp.MustCompile(`HTTP API   (http://127\.0\.0\.1:\d+/v1)`).FindStringSubmatch(out.String())
	if m == nil || !strings.Contains(out.String(), "1 configured") {
		t.Fatalf("keel serve's banner:\n%s", out.String())
	}
	api := m[1]
	if r := httpDo(t, ctx, http.MethodGet, api+"/sessions/serve-e2e", "", ""); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without a key: %d", r.StatusCode)
	}
	stream := httpDo(t, ctx, http.MethodGet, api+"/sessions/serve-e2e/events?after=0", key, "")
	if stream.StatusCode != http.StatusOK {
		t.Fatalf("stream: %d %s", stream.StatusCode, readAll(t, stream))
	}
	sc := bufio.NewScanner(stream.Body)
	var ids []string
	for sc.Scan() {
		line := sc.Text()
		if id, ok := strings.CutPrefix(line, "id: "); ok {
			ids = append(ids, id)
		}
		if line == "event: "+keel.TypeRunCompleted {
			break
		}
	}
	stream.Body.Close()
	if len(ids) == 0 || ids[0] != "1" {
		t.Fatalf("durable event ids %v", ids)
	}
	st := httpDo(t, ctx, http.MethodGet, api+"/sessions/serve-e2e", key, "")
	var state struct {
		State string `json:"state"`
	}
	if err := json.Unmarshal([]byte(readAll(t, st)), &state); err != nil || state.State != string(keel.StateCompleted) {
		t.Fatalf("state %+v: %v", state, err)
	}
	interrupt()
	if code := <-done; code != exitOK || !strings.Contains(out.String(), "keel serve: stopped.") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	for _, s := range []string{out.String(), errOut.String()} {
		if strings.Contains(s, key) {
			t.Fatal("keel serve printed its API key")
		}
	}
}

// httpDo makes a request; with key, as a bearer token; a GET of an events
// URL asks for an event stream.
func httpDo(t *testing.T, ctx context.Context, method, url, key, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if strings.Contains(url, "/events") {
		req.Header.Set("Accept", "text/event-stream")
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return resp
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
