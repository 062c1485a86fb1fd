package e2e_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdkclient "go.temporal.io/sdk/client"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/crypt"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
	"github.com/keelrun/keel/server/store"
	"github.com/keelrun/keel/server/tool"
	"github.com/keelrun/keel/server/worker"
)

// foreignTSDir is the TypeScript example that drives a session with
// Temporal's SDK alone (docs/foreign-clients.md).
const foreignTSDir = "../examples/temporal-client-ts"

// TestForeignTypeScriptClient runs server/examples/temporal-client-ts against an
// embedded server and a keel worker with a scripted model: a client with
// no keel code sends a prompt (update-with-start "send"), waits for the
// outcome (update "outcome") and reads the session's events (query
// "events"), once with plain payloads and once reading values over 4 KiB
// through keel's codec endpoint, and against an encrypting worker
// through that endpoint. It needs node and npm; without them it is skipped, unless CI
// is set, where it fails.
func TestForeignTypeScriptClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = exec.LookPath("npm")
	}
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skip("node or npm is not installed: the TypeScript example cannot run (with CI set, this test fails instead)")
		}
		t.Fatal("CI is set but node or npm is not installed (.ci/run installs nodejs and npm)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := foreignTSProject(t, ctx)

	srv := keeltest.StartServer(t, devserver.Config{})
	book := &keeltest.ScriptBook{}
	keeltest.StartWorker(t, srv, keeltest.WorkerOptions{Models: book})

	t.Run("plain", func(t *testing.T) {
		model := book.Add(t, "foreign-plain", `{"turns":[{"text":["Hello from ", "keel."]}]}`)
		lines := runForeignTS(t, ctx, node, dir, srv, "ts-foreign", "KEEL_MODEL="+model)
		checkForeignTS(t, lines, "ts-foreign", "Hello from keel.")
	})

	// Five runs, then the outcome of the first: the session answers any of
	// its recent runs, as plain JSON (docs/contract.md §3).
	t.Run("five runs, then run 1", func(t *testing.T) {
		model := book.Add(t, "foreign-five", `{"repeat":true,"turns":[{"text":["Again."]}]}`)
		lines := runForeignTS(t, ctx, node, dir, srv, "ts-foreign-five", "KEEL_MODEL="+model,
			"KEEL_RUNS=5", "KEEL_OUTCOME_OF=1")
		var outcome keel.Outcome
		if err := json.Unmarshal([]byte(lines["outcome"]), &outcome); err != nil {
			t.Fatalf("outcome line: %v\n%v", err, lines)
		}
		if outcome.Status != keel.StatusCompleted || outcome.Text != "Again." || outcome.RunID != keel.RunID("ts-foreign-five", 1) {
			t.Errorf("outcome = %+v, want run 1 completed", outcome)
		}
	})

	long := strings.Repeat("keel ", 2000)
	text, _ := json.Marshal(long)

	// A text over 4 KiB without a codec: the outcome update answers it
	// cut, flagged, as plain JSON; the events page, moved to the content
	// store, cannot be read without keel's codec.
	t.Run("long, plain", func(t *testing.T) {
		model := book.Add(t, "foreign-long", `{"turns":[{"text":[`+string(text)+`]}]}`)
		lines := runForeignTS(t, ctx, node, dir, srv, "ts-foreign-long", "KEEL_MODEL="+model)
		var outcome keel.Outcome
		if err := json.Unmarshal([]byte(lines["outcome"]), &outcome); err != nil {
			t.Fatalf("outcome line: %v\n%v", err, lines)
		}
		if outcome.Status != keel.StatusCompleted || !outcome.TextCut || outcome.Text != long[:api.MaxOutcomeText] || outcome.Seq == 0 {
			t.Errorf("outcome = %+v, want completed, text cut to %d bytes, with the terminal event's seq", outcome, api.MaxOutcomeText)
		}
		if !strings.Contains(lines["events_error"], "claim-check") {
			t.Errorf("events without the codec: %v, want the claim-check encoding refused", lines)
		}
	})

	// The same through keel's codec endpoint, as Temporal's remote codec
	// protocol has it: the example reads the whole text from the run's
	// terminal event.
	t.Run("codec", func(t *testing.T) {
		model := book.Add(t, "foreign-codec", `{"turns":[{"text":[`+string(text)+`]}]}`)
		var decodes atomic.Int64
		codec := keeltest.Codec(t, srv).Handler(store.HandlerOptions{})
		endpoint := httptest.NewServer(http.StripPrefix("/codec", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/decode") {
				decodes.Add(1)
			}
			codec.ServeHTTP(w, r)
		})))
		t.Cleanup(endpoint.Close)
		lines := runForeignTS(t, ctx, node, dir, srv, "ts-foreign-codec",
			"KEEL_MODEL="+model, "KEEL_CODEC_ENDPOINT="+endpoint.URL+"/codec")
		checkForeignTS(t, lines, "ts-foreign-codec", long[:api.MaxOutcomeText])
		var full string
		if err := json.Unmarshal([]byte(lines["full_text"]), &full); err != nil || full != long {
			t.Errorf("full_text = %.60q… (%v), want the whole text from the terminal event", lines["full_text"], err)
		}
		if decodes.Load() == 0 {
			t.Error("the example never called the codec endpoint's /decode")
		}
	})

	// With encryption on: the worker refuses a plaintext send, and the
	// example, through the codec endpoint (behind a token), sends
	// ciphertext and reads the encrypted outcome and events.
	t.Run("encrypted", func(t *testing.T) {
		esrv := keeltest.StartServer(t, devserver.Config{})
		keys, err := crypt.LoadKeyFile(writeKeyFile(t, map[string]string{}, "k1"))
		if err != nil {
			t.Fatal(err)
		}
		st, err := store.Open(ctx, "mem://")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		codec := store.NewCodec(st, store.CodecOptions{Encryption: crypt.NewCodec(keys)})
		tc, err := esrv.Dial(ctx, sdkclient.Options{DataConverter: store.NewDataConverter(codec)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(tc.Close)
		tools, err := tool.Builtins(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		w, err := worker.New(tc, worker.Options{Models: keeltest.ScriptModels(t, `{"turns":[{"text":["secret reply"]}]}`),
			Tools: tools, Codec: codec, StopTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)

		plain := exec.CommandContext(ctx, node, "main.mjs")
		plain.Dir = dir
		plain.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+esrv.Address(), "TEMPORAL_NAMESPACE="+esrv.Namespace(),
			"KEEL_SESSION=ts-foreign-plaintext")
		// The session's first execution fails on its plaintext input
		// before it registers its updates, so the send is refused as an
		// unknown update (contract §16.10: a workflow started with
		// plaintext input fails).
		if out, err := plain.CombinedOutput(); err == nil || strings.Contains(string(out), "outcome: ") {
			t.Errorf("a plaintext send to an encrypting worker: err %v, output:\n%s\nwant it refused", err, out)
		}

		const token = "foreign-codec-token"
		endpoint := httptest.NewServer(http.StripPrefix("/codec", codec.Handler(store.HandlerOptions{Token: token})))
		t.Cleanup(endpoint.Close)
		lines := runForeignTS(t, ctx, node, dir, esrv, "ts-foreign-encrypted",
			"KEEL_CODEC_ENDPOINT="+endpoint.URL+"/codec", "KEEL_CODEC_TOKEN="+token)
		checkForeignTS(t, lines, "ts-foreign-encrypted", "secret reply")
	})
}

// runForeignTS runs the example for session with env and returns its
// output lines by prefix ("outcome", "events", ...).
func runForeignTS(t *testing.T, ctx context.Context, node, dir string, srv *devserver.Server, session string, env ...string) map[string]string {
	t.Helper()
	cmd := exec.CommandContext(ctx, node, "main.mjs")
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(),
		"TEMPORAL_ADDRESS="+srv.Address(), "TEMPORAL_NAMESPACE="+srv.Namespace(),
		"KEEL_SESSION="+session, "KEEL_PROMPT=Say hello."), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node main.mjs: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
	if len(out) < 4000 {
		t.Logf("node main.mjs:\n%s", out)
	}
	lines := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok {
			lines[k] = v
		}
	}
	return lines
}

// checkForeignTS checks the example's output: run 1 of session completed
// with text, and its events from run.started to run.completed, inline.
func checkForeignTS(t *testing.T, lines map[string]string, session, text string) {
	t.Helper()
	var outcome keel.Outcome
	if err := json.Unmarshal([]byte(lines["outcome"]), &outcome); err != nil {
		t.Fatalf("outcome line: %v\n%v", err, lines)
	}
	if outcome.Status != keel.StatusCompleted || outcome.Text != text ||
		outcome.Number != 1 || outcome.RunID != keel.RunID(session, 1) {
		t.Errorf("outcome = %+v, want run 1 completed with text %.40q…", outcome, text)
	}
	events := strings.Fields(lines["events"])
	if !cliInOrder(events, []string{keel.TypeRunStarted, keel.TypeRunCompleted}) {
		t.Errorf("events = %v, want %s then %s", events, keel.TypeRunStarted, keel.TypeRunCompleted)
	}
	if seg, ok := lines["segment"]; ok {
		t.Errorf("a one-turn run's events came as a segment: %s", seg)
	}
}

// foreignTSProject copies the example to a temporary directory and
// installs its locked dependencies there (npm ci), or reuses the
// example's node_modules when it has one.
func foreignTSProject(t *testing.T, ctx context.Context) string {
	t.Helper()
	src, err := filepath.Abs(foreignTSDir)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{"package.json", "package-lock.json", "main.mjs"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if fi, err := os.Stat(filepath.Join(src, "node_modules")); err == nil && fi.IsDir() {
		if err := os.Symlink(filepath.Join(src, "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in a copy of %s: %v\n%s", foreignTSDir, err, out)
	}
	return dir
}
