package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"

	"github.com/keelrun/keel/connect"
	"github.com/keelrun/keel/logging"
	"github.com/keelrun/keel/server/gateway"
	"github.com/keelrun/keel/server/provider/providertest"
)

// TestNoSecretsInLogs runs keel dev's stack (server, gateway, codec
// endpoint, encryption) and a `keel worker` with every secret keel holds
// configured: a model provider's API key, Temporal's API key, the HTTP
// API's keys, the codec endpoint's token and an encryption key. It logs
// everything at debug level as JSON, makes the provider use its key and
// then fail echoing it, calls the HTTP API with a right and a wrong key,
// and searches every log record, every command's output and every answer
// for the secrets. It also checks the run fields of the worker's records.
func TestNoSecretsInLogs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	ctx, cancel := context.WithTimeout(withNoInput(context.Background()), 3*time.Minute)
	defer cancel()

	const (
		openAIKey   = "sk-proj-LEAKCHECKopenai8f3a1c2e"
		temporalKey = "tmprl-LEAKCHECK-temporal-2b7d9e"
		gatewayKey  = "gw-LEAKCHECK-gateway-5c1e4f0a9b"
		wrongKey    = "gw-LEAKCHECK-wrong-0a9b5c1e4f"
		codecToken  = "codec-LEAKCHECK-token-7e6d5c"
	)
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	cryptKey := base64.StdEncoding.EncodeToString(raw)
	secrets := map[string]string{"OpenAI API key": openAIKey, "Temporal API key": temporalKey,
		"HTTP API key": gatewayKey, "wrong HTTP API key": wrongKey, "codec token": codecToken,
		"encryption key": cryptKey, "encryption key (raw)": string(raw)}

	dir := t.TempDir()
	keyFile := filepath.Join(dir, "keys")
	if err := os.WriteFile(keyFile, []byte("k1 "+cryptKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	storeDir := t.TempDir()

	// An OpenAI-compatible server: a prompt saying FAIL gets a 401 that
	// echoes the key, as OpenAI's does; any other gets a short answer.
	okStream := providertest.SSEEvents(
		`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello from the model"},"finish_reason":null}]}`+"\n\n",
		`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":4,"total_tokens":9}}`+"\n\n",
		"data: [DONE]\n\n")
	var models *providertest.Server
	models = providertest.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
		// The server read the body already; requests come one at a time.
		if bytes.Contains(models.Last().Body, []byte("FAIL")) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":{"message":"Incorrect API key provided: `+r.Header.Get("Authorization")[len("Bearer "):]+
				`. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","code":"invalid_api_key"}}`)
			return
		}
		okStream(w, r)
	})
	t.Setenv("OPENAI_API_KEY", openAIKey)
	t.Setenv("OPENAI_BASE_URL", models.URL+"/v1")
	t.Setenv(connect.EnvAPIKey, temporalKey)
	t.Setenv(envCodecToken, codecToken)

	// keel dev's stack, logging everything it does.
	var stackLogs syncBuffer
	stackLogger, err := logging.New(logging.Options{Format: logging.FormatJSON, Level: zapcore.DebugLevel, Output: &stackLogs})
	if err != nil {
		t.Fatal(err)
	}
	stack, err := startDevStack(ctx, devConfig{scripts: testScripts(), noUI: true, workspace: t.TempDir(), store: "file://" + storeDir,
		logger: stackLogger, logLevel: zapcore.DebugLevel,
		gateway: gateway.Options{APIKeys: []string{gatewayKey}},
		crypt:   devCryptFlags{keyFile: keyFile, codecToken: codecToken}})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = stack.stop()
		}
	}()
	// Runs go to the `keel worker` below, which reads the keys from its
	// environment as an operator's would.
	stack.worker.Stop()
	stack.worker = nil

	var workerOut, workerLogs syncBuffer
	ready := workerOut.notify("polling task queue")
	workerCtx, stopWorker := context.WithCancel(ctx)
	workerDone := make(chan int, 1)
	go func() {
		workerDone <- dispatch(workerCtx, []string{"worker", "--address", stack.server.Address(), "--tls=false",
			"--nats", "", "--store", "file://" + storeDir, "--encryption-key-file", keyFile, "--workspace", t.TempDir(), "--scripts", testScripts(),
			"--log-format", "json", "--log-level", "debug"}, &workerOut, &workerLogs)
	}()
	select {
	case <-ready:
	case code := <-workerDone:
		t.Fatalf("keel worker exited with %d:\n%s\n%s", code, workerOut.String(), workerLogs.String())
	case <-ctx.Done():
		t.Fatalf("keel worker did not start:\n%s\n%s", workerOut.String(), workerLogs.String())
	}

	// Everything keel says, besides its logs: command output and answers.
	var said strings.Builder
	keel := func(args ...string) int {
		var out, errOut bytes.Buffer
		code := dispatch(ctx, append([]string{args[0], "--address", stack.server.Address(), "--tls=false", "--nats", "",
			"--codec-endpoint", stack.codecURL, "--encryption-key-file", keyFile}, args[1:]...), &out, &errOut)
		said.WriteString(out.String() + errOut.String())
		return code
	}
	if code := keel("run", "--session", "leak", "--model", "openai:gpt-test", "say hello"); code != exitOK {
		t.Fatalf("run 1: exit %d:\n%s", code, said.String())
	}
	if !strings.Contains(said.String(), "Hello from the model") {
		t.Fatalf("run 1 did not show the model's answer:\n%s", said.String())
	}
	if got := models.Requests()[0].Header.Get("Authorization"); got != "Bearer "+openAIKey {
		t.Fatalf("the provider got Authorization %q, want the configured key", got)
	}
	if code := keel("run", "--session", "leak", "--model", "openai:gpt-test", "FAIL please"); code == exitOK {
		t.Fatalf("run 2 succeeded against a provider refusing the key:\n%s", said.String())
	}
	if !strings.Contains(said.String(), "Incorrect API key provided") {
		t.Fatalf("run 2's error does not say why:\n%s", said.String())
	}
	for _, key := range []string{gatewayKey, wrongKey, ""} {
		for _, path := range []string{"/sessions/leak", "/sessions/leak/events?after=0"} {
			resp := httpDo(t, ctx, http.MethodGet, stack.gatewayURL()+path, key, "")
			if strings.Contains(path, "events") && resp.StatusCode == http.StatusOK {
				// A stream stays open: its first event is enough.
				line, _ := bufio.NewReader(resp.Body).ReadString('\n')
				resp.Body.Close()
				said.WriteString(line)
				continue
			}
			said.WriteString(readAll(t, resp))
		}
	}
	if code := keel("events", "leak"); code != exitOK {
		t.Fatalf("events: exit %d:\n%s", code, said.String())
	}

	stopWorker()
	<-workerDone
	stopped = true
	if err := stack.stop(); err != nil {
		t.Fatal(err)
	}

	everything := map[string]string{"keel dev's logs": stackLogs.String(), "keel worker's logs": workerLogs.String(),
		"keel worker's output": workerOut.String(), "command output and HTTP answers": said.String()}
	for where, text := range everything {
		for what, secret := range secrets {
			if strings.Contains(text, secret) {
				t.Errorf("the %s appears in %s", what, where)
			}
		}
	}
	checkRunFields(t, workerLogs.String())
	if !strings.Contains(stackLogs.String(), `"component":"temporal"`) || !strings.Contains(stackLogs.String(), `"component":"gateway"`) {
		t.Errorf("keel dev's logs lack the server's or the gateway's records, so the search proves little")
	}
}

// checkRunFields checks the worker's JSON records: each one keel writes
// about a model turn carries session_id, run_id, step and attempt, and the
// Temporal SDK's records about the session's workflow, where its runs
// execute, carry session_id.
func checkRunFields(t *testing.T, logs string) {
	t.Helper()
	var turns, sdk int
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("not a JSON record: %q", line)
			continue
		}
		if rec["activity"] == "ModelTurn" {
			turns++
			for _, f := range []string{"session_id", "run_id", "step", "attempt"} {
				if rec[f] == nil {
					t.Errorf("a model turn's record lacks %s: %s", f, line)
				}
			}
			if rec["session_id"] != "leak" || !strings.HasPrefix(rec["run_id"].(string), "leak/run-") {
				t.Errorf("a model turn's record names another run: %s", line)
			}
		}
		// The runs execute in the session's workflow (an inline session):
		// the SDK's records about them name the session's workflow, and
		// carry its session_id.
		switch id, _ := rec["WorkflowID"].(string); {
		case id == "leak":
			sdk++
			if rec["session_id"] != "leak" {
				t.Errorf("an SDK record about session %s lacks its session_id: %s", id, line)
			}
		case strings.Contains(id, "/run-"):
			if rec["run_id"] != id || rec["session_id"] != "leak" {
				t.Errorf("an SDK record about run %s lacks its run fields: %s", id, line)
			}
		}
	}
	if turns < 2 || sdk == 0 {
		t.Errorf("the worker logged %d records about model turns and %d SDK records about the session's runs; want both:\n%s", turns, sdk, logs)
	}
}

// syncBuffer is a buffer written by several goroutines; notify reports
// when what it holds first contains a string.
type syncBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	waiters map[string]chan struct{}
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.b.Write(p)
	for want, ch := range s.waiters {
		if bytes.Contains(s.b.Bytes(), []byte(want)) {
			close(ch)
			delete(s.waiters, want)
		}
	}
	return n, err
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) notify(want string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan struct{})
	if s.waiters == nil {
		s.waiters = map[string]chan struct{}{}
	}
	s.waiters[want] = ch
	return ch
}
