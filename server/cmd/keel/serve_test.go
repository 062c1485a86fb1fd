package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"

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
	code, _, stderr = call(t, "serve", "--web-ui", "127.0.0.1:8233")
	if code != exitUsage || !strings.Contains(stderr, "--web-ui") {
		t.Fatalf("bad --web-ui: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = call(t, "serve", "--listen", "nowhere")
	if code != exitFailed || !strings.Contains(stderr, "nowhere") {
		t.Fatalf("bad --listen: exit %d, stderr %q", code, stderr)
	}
	// The gateway's limits and trusted proxies are checked before
	// anything is dialled.
	for _, args := range [][]string{{"--max-streams", "-1"}, {"--max-followed-sessions", "-3"}, {"--trusted-proxy", "proxy.example"}} {
		code, _, stderr = call(t, append([]string{"serve", "--address", closedAddress(t)}, args...)...)
		if code != exitFailed || !strings.Contains(stderr, strings.TrimPrefix(args[0], "--")[:7]) {
			t.Fatalf("%v: exit %d, stderr %q", args, code, stderr)
		}
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
	stack, err := startDevStack(ctx, devConfig{scripts: testScripts(), noUI: true, workspace: t.TempDir(), logger: quietLogger(), logLevel: zapcore.ErrorLevel})
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

	const key, readKey = "serve-test-key-0123456789", "serve-test-read-key-0123456789"
	keyFile := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keyFile, []byte(key+"\n"+readKey+" scope=read prefix=serve-\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	serveCtx, interrupt := context.WithCancel(ctx)
	defer interrupt()
	out, errOut, done := inBackground(t, ctx, "keel serve is up.", func(stdout, stderr io.Writer) int {
		return cmdServe(serveCtx, []string{"--address", stack.server.Address(), "--nats", stack.nats.ClientURL(),
			"--codec-endpoint", stack.codecURL, "--http-port", "0", "--api-key-file", keyFile,
			"--web-ui", "http://127.0.0.1:8233/"}, stdout, stderr)
	})
	m := regexp.MustCompile(`HTTP API   (http://127\.0\.0\.1:\d+/v1)`).FindStringSubmatch(out.String())
	if m == nil || !strings.Contains(out.String(), "2 configured") {
		t.Fatalf("keel serve's banner:\n%s", out.String())
	}
	api := m[1]
	if r := httpDo(t, ctx, http.MethodGet, api+"/sessions/serve-e2e", "", ""); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without a key: %d", r.StatusCode)
	}
	// The key file's read-only key reads, and may not send.
	for _, c := range []struct {
		method, path, body string
		status             int
	}{
		{http.MethodGet, "/sessions/serve-e2e", "", http.StatusOK},
		{http.MethodPost, "/sessions/serve-e2e/runs", `{"prompt":"hi"}`, http.StatusForbidden},
	} {
		r := httpDo(t, ctx, c.method, api+c.path, readKey, c.body)
		if body := readAll(t, r); r.StatusCode != c.status {
			t.Fatalf("read-only key, %s %s: %d %s", c.method, c.path, r.StatusCode, body)
		}
	}
	// The web page links to the Temporal Web UI that --web-ui names.
	var list struct {
		WebUI string `json:"web_ui"`
	}
	if err := json.Unmarshal([]byte(readAll(t, httpDo(t, ctx, http.MethodGet, api+"/sessions", key, ""))), &list); err != nil ||
		list.WebUI != "http://127.0.0.1:8233" {
		t.Fatalf("GET /v1/sessions: web_ui %q (%v), want --web-ui's URL", list.WebUI, err)
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

// A client of keel dev's HTTP API resumes its event stream with
// Last-Event-ID after the whole keel dev restarted mid-run (same data
// directory): the run finishes on the new process and the stream's ids go
// on without a gap or a repeat.
func TestGatewayStreamAcrossDevRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server twice")
	}
	ctx, cancel := context.WithTimeout(withNoInput(context.Background()), 3*time.Minute)
	defer cancel()
	cfg := devConfig{scripts: testScripts(), dataDir: t.TempDir(), noUI: true, workspace: t.TempDir(), logger: quietLogger(), logLevel: zapcore.ErrorLevel}
	first, err := startDevStack(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	script := writeScript(t, `{"turns":[
	  {"tool_calls":[{"id":"s1","name":"sleep","arguments":{"seconds":3}}]},
	  {"text":["after ","the ","restart"]}]}`)
	resp := httpDo(t, ctx, http.MethodPost, first.gatewayURL()+"/sessions/dev-restart/runs", "",
		`{"prompt":"sleep","model":"`+script+`","tools":["sleep"]}`)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST runs: %d %s", resp.StatusCode, readAll(t, resp))
	}
	resp.Body.Close()
	stream := httpDo(t, ctx, http.MethodGet, first.gatewayURL()+"/sessions/dev-restart/events?after=0", "", "")
	ids := readIDsUntil(t, stream, keel.TypeToolStarted)
	if err := first.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	stream.Body.Close()

	second, err := startDevStack(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer second.stop()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, second.gatewayURL()+"/sessions/dev-restart/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", ids[len(ids)-1])
	resumed, err := http.DefaultClient.Do(req)
	if err != nil || resumed.StatusCode != http.StatusOK {
		t.Fatalf("resume: %v %v", err, resumed)
	}
	ids = append(ids, readIDsUntil(t, resumed, keel.TypeRunCompleted)...)
	resumed.Body.Close()
	for i, id := range ids {
		if id != strconv.Itoa(i+1) {
			t.Fatalf("event ids across the restart: %v", ids)
		}
	}
}

// readIDsUntil reads an event stream up to an event of type typ and
// returns the ids it carried.
func readIDsUntil(t *testing.T, resp *http.Response, typ string) []string {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: %d %s", resp.StatusCode, readAll(t, resp))
	}
	var ids []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if id, ok := strings.CutPrefix(line, "id: "); ok {
			ids = append(ids, id)
		}
		if line == "event: "+typ {
			return ids
		}
	}
	t.Fatalf("stream ended before %s: %v (ids %v)", typ, sc.Err(), ids)
	return nil
}
