package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	keelpkg "github.com/keelrun/keel"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/server/internal/keeltest"
	"github.com/keelrun/keel/server/provider/scripted"
)

// watchWriter collects output and signals when it contains a string, so a
// test waits for what a command printed rather than for time to pass.
type watchWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
}

func newWatchWriter(want string) *watchWriter {
	return &watchWriter{want: want, seen: make(chan struct{})}
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	before := strings.Contains(w.buf.String(), w.want)
	w.buf.Write(p)
	if !before && strings.Contains(w.buf.String(), w.want) {
		close(w.seen)
	}
	return len(p), nil
}

func (w *watchWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// wait returns once the output contains the string, or fails the test
// when ctx ends first.
// inBackground runs a keel command in a goroutine and returns once its
// stdout shows want; the command's exit status arrives on done.
func inBackground(t *testing.T, ctx context.Context, want string, run func(stdout, stderr io.Writer) int) (out *watchWriter, errOut *bytes.Buffer, done <-chan int) {
	t.Helper()
	out, errOut = newWatchWriter(want), &bytes.Buffer{}
	status := make(chan int, 1)
	go func() { status <- run(out, errOut) }()
	out.wait(t, ctx)
	return out, errOut, status
}

func (w *watchWriter) wait(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-w.seen:
	case <-ctx.Done():
		t.Fatalf("output never contained %q:\n%s", w.want, w.String())
	}
}

// quietLogger keeps the server's and worker's logs out of the test output:
// the tests check what the commands print, which says what went wrong, and
// the worker logs every provider failure the tests inject.
func quietLogger() *zap.Logger {
	return zap.NewNop()
}

// withNoInput gives commands an empty stdin, so a test run from a
// terminal does not turn `keel run` interactive.
func withNoInput(ctx context.Context) context.Context {
	return withStdin(ctx, strings.NewReader(""))
}

// testScripts is the scripts directory of the workers these tests start
// (startDevStack's, keel worker's): a client names a script, never a file.
var testScripts = sync.OnceValue(func() string {
	dir, err := os.MkdirTemp("", "keel-test-scripts-")
	if err != nil {
		panic(err)
	}
	return dir
})

var scriptCount atomic.Int64

// writeScript adds a script to testScripts under a name of its own and
// returns its model spec, scripted:NAME.
func writeScript(t *testing.T, script string) string {
	t.Helper()
	name := fmt.Sprintf("%s-%d", keeltest.ScriptName(t.Name()), scriptCount.Add(1))
	if err := os.WriteFile(filepath.Join(testScripts(), name+".json"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	return "scripted:" + name
}

// TestEndToEnd runs the commands against a real stack in this process: an
// in-memory Temporal server on free ports, embedded NATS, and a worker
// publishing deltas to it, as `keel dev` assembles them.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	ctx, cancel := context.WithTimeout(withNoInput(context.Background()), 3*time.Minute)
	defer cancel()
	workspace := t.TempDir()
	stack, err := startDevStack(ctx, devConfig{scripts: testScripts(), noUI: true, workspace: workspace, logger: quietLogger(), logLevel: zapcore.ErrorLevel})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := stack.stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	}()
	conn := []string{"--address", stack.server.Address(), "--nats", stack.nats.ClientURL(), "--codec-endpoint", stack.codecURL}
	keel := func(ctx context.Context, stdout, stderr *bytes.Buffer, args ...string) int {
		return dispatch(ctx, args, stdout, stderr)
	}
	withConn := func(cmd string, args ...string) []string {
		if cmd == "events" || cmd == "run" {
			return append(append([]string{cmd}, conn...), args...)
		}
		return append([]string{cmd, "--address", stack.server.Address(), "--codec-endpoint", stack.codecURL}, args...)
	}

	t.Run("demo", func(t *testing.T) {
		var out, errOut bytes.Buffer
		code := keel(ctx, &out, &errOut, withConn("run", "--session", "e2e-demo", "Give me a tour")...)
		got := out.String()
		if code != exitOK {
			t.Fatalf("exit status %d, want 0\nstdout:\n%s\nstderr:\n%s", code, got, errOut.String())
		}
		for _, want := range []string{
			"● run 1 · scripted:demo · session e2e-demo",
			// Streamed over NATS: only the final step's text is durable.
			"Hello! I'm keel's built-in demo agent.",
			"┌ list_files {\"path\":\".\"}\n└ ✓ list_files",
			"  welcome.txt\n",
			"┌ read_file {\"path\":\"welcome.txt\"}\n└ ✓ read_file",
			"  Welcome to keel.\n",
			"┌ sleep {\"seconds\":2}\n└ ✓ sleep",
			"┌ write_file",
			"└ ✓ write_file",
			"✓ completed in 5 steps\n  usage: 3065 tokens in · 210 out · 5 requests\n",
		} {
			if !strings.Contains(got, want) {
				t.Errorf("output lacks %q:\n%s", want, got)
			}
		}
		final := "Done. I listed the workspace, read the welcome note, slept on a durable timer and wrote notes/demo-run.md."
		if n := strings.Count(got, final); n != 1 {
			t.Errorf("final text shown %d times, want once:\n%s", n, got)
		}
		if strings.Contains(errOut.String(), "warning") {
			t.Errorf("unexpected warning: %s", errOut.String())
		}
		if _, err := os.Stat(filepath.Join(workspace, "notes", "demo-run.md")); err != nil {
			t.Errorf("the demo's note was not written: %v", err)
		}
	})

	t.Run("inspect", func(t *testing.T) {
		var out, errOut bytes.Buffer
		if code := keel(ctx, &out, &errOut, withConn("events", "e2e-demo")...); code != exitOK {
			t.Fatalf("events: status %d: %s", code, errOut.String())
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if !strings.HasPrefix(lines[0], "#1 run.started e2e-demo/run-1") ||
			!regexp.MustCompile(`^#\d+ run\.completed revision 1 · 5 steps`).MatchString(lines[len(lines)-1]) {
			t.Errorf("events from the start to the terminal event expected:\n%s", out.String())
		}
		for i, l := range lines {
			if !strings.HasPrefix(l, fmt.Sprintf("#%d ", i+1)) {
				t.Errorf("line %d is not event #%d: %q", i, i+1, l)
			}
		}

		out.Reset()
		if code := keel(ctx, &out, &errOut, withConn("events", "e2e-demo", "--after", fmt.Sprint(len(lines)-1), "--json")...); code != exitOK {
			t.Fatalf("events --json: status %d: %s", code, errOut.String())
		}
		var env struct {
			Seq  int64  `json:"seq"`
			Type string `json:"type"`
		}
		if err := json.Unmarshal(out.Bytes(), &env); err != nil || env.Seq != int64(len(lines)) || env.Type != "run.completed" {
			t.Errorf("events --after N-1 --json: %v %+v from %q", err, env, out.String())
		}

		out.Reset()
		if code := keel(ctx, &out, &errOut, withConn("state", "e2e-demo")...); code != exitOK {
			t.Fatalf("state: status %d: %s", code, errOut.String())
		}
		var st struct {
			State string `json:"state"`
			Runs  int    `json:"runs"`
		}
		if err := json.Unmarshal(out.Bytes(), &st); err != nil || st.State != "completed" || st.Runs != 1 {
			t.Errorf("state: %v %+v from %s", err, st, out.String())
		}

		out.Reset()
		if code := keel(ctx, &out, &errOut, withConn("history", "e2e-demo", "--limit", "4")...); code != exitOK {
			t.Fatalf("history: status %d: %s", code, errOut.String())
		}
		for _, want := range []string{"── user\nGive me a tour\n", "→ list_files {\"path\":\".\"}", "── tool list_files · ok · call_list\n",
			"messages 0–3 of 10", "more: --offset 4"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("history lacks %q:\n%s", want, out.String())
			}
		}

		errOut.Reset()
		if code := keel(ctx, &out, &errOut, withConn("state", "no-such-session")...); code != exitFailed ||
			!strings.Contains(errOut.String(), "not found") {
			t.Errorf("state of a missing session: status %d, stderr %q", code, errOut.String())
		}
	})

	t.Run("first_text", func(t *testing.T) {
		// A model that streams at once, with no chunk delay: its first
		// deltas are published within milliseconds of the run starting,
		// before a subscriber opened after Send returned would be in
		// place. The SDK subscribes inside Send, so none may be lost. The
		// first step's text is never durable (only the last step's text
		// is in run.completed), so it shows only if its deltas arrived.
		model := writeScript(t, `{"turns":[
		  {"text":["First ","words."],"tool_calls":[{"id":"m","name":"missing","arguments":{}}]},
		  {"text":["Last."]}]}`)
		for i := range 5 {
			var out, errOut bytes.Buffer
			code := keel(ctx, &out, &errOut, withConn("run", "--model", model, "--tools", "", fmt.Sprint("go ", i))...)
			if code != exitOK {
				t.Fatalf("run %d: exit status %d\n%s\n%s", i, code, out.String(), errOut.String())
			}
			if !regexp.MustCompile(`· step 1 [^\n]*\nFirst words\.\n┌ missing`).MatchString(out.String()) {
				t.Errorf("run %d: the first step's streamed text is missing:\n%s", i, out.String())
			}
		}
	})

	t.Run("stream_reset", func(t *testing.T) {
		model := writeScript(t, `{"turns":[{"failures":[{"kind":"stream_cut","after_chunks":1}],"text":["Half ","and whole."]}]}`)
		var out, errOut bytes.Buffer
		code := keel(ctx, &out, &errOut, withConn("run", "--model", model, "cut me")...)
		if code != exitOK {
			t.Fatalf("exit status %d, want 0\n%s\n%s", code, out.String(), errOut.String())
		}
		if !regexp.MustCompile(`(?m)^↺ attempt 1 abandoned \(retryable failure: stream_cut\).*\n  waiting 1s before attempt 2.*\nHalf and whole\.\n`).MatchString(out.String()) {
			t.Errorf("no reset marker followed by the new attempt on its own line:\n%s", out.String())
		}
	})

	t.Run("large_values", func(t *testing.T) {
		// A 64 KiB tool result goes to the content store; the commands read
		// it back through keel dev's codec endpoint, and say clearly when
		// they cannot.
		big := strings.Repeat("keel-", 64<<10/5)
		if err := os.WriteFile(filepath.Join(workspace, "big.txt"), []byte(big), 0o644); err != nil {
			t.Fatal(err)
		}
		model := writeScript(t, `{"turns":[{"tool_calls":[{"id":"r","name":"read_file","arguments":{"path":"big.txt"}}]},{"text":["read"]}]}`)
		var out, errOut bytes.Buffer
		if code := keel(ctx, &out, &errOut, withConn("run", "--session", "e2e-big", "--model", model, "--tools", "read_file", "read it")...); code != exitOK {
			t.Fatalf("run: status %d\n%s\n%s", code, out.String(), errOut.String())
		}
		out.Reset()
		if code := keel(ctx, &out, &errOut, withConn("events", "e2e-big", "--json")...); code != exitOK {
			t.Fatalf("events: status %d: %s", code, errOut.String())
		}
		if !strings.Contains(out.String(), big) {
			t.Errorf("events lack the tool's whole output (%d bytes printed)", out.Len())
		}
		out.Reset()
		errOut.Reset()
		code := keel(ctx, &out, &errOut, "events", "--address", stack.server.Address(), "--nats", "",
			"--codec-endpoint", "http://127.0.0.1:1/codec", "e2e-big", "--json")
		if code == exitOK || !strings.Contains(errOut.String(), "codec endpoint http://127.0.0.1:1/codec") {
			t.Errorf("events without a reachable codec endpoint: status %d, stderr %q", code, errOut.String())
		}
	})

	t.Run("failure", func(t *testing.T) {
		model := writeScript(t, `{"turns":[{"failures":[{"kind":"auth","status":401,"message":"bad key"}],"text":["never"]}]}`)
		var out, errOut bytes.Buffer
		code := keel(ctx, &out, &errOut, withConn("run", "--model", model, "fail")...)
		if code != exitFailed {
			t.Fatalf("exit status %d, want %d\n%s\n%s", code, exitFailed, out.String(), errOut.String())
		}
		if !strings.Contains(out.String(), "✗ failed: keel.ProviderError: ") || !strings.Contains(out.String(), "(not retryable)") {
			t.Errorf("no failure line:\n%s", out.String())
		}
	})

	t.Run("cancel", func(t *testing.T) {
		model := writeScript(t, `{"turns":[{"tool_calls":[{"id":"z","name":"sleep","arguments":{"seconds":3600}}]},{"text":["woke"]}]}`)
		out, errOut, done := inBackground(t, ctx, "┌ sleep", func(stdout, stderr io.Writer) int {
			return dispatch(ctx, withConn("run", "--session", "e2e-cancel", "--model", model, "--tools", "sleep", "nap"), stdout, stderr)
		})

		// A second prompt while the run is active is refused, with a hint.
		var o2, e2 bytes.Buffer
		if code := keel(ctx, &o2, &e2, withConn("run", "--session", "e2e-cancel", "again")...); code != exitFailed ||
			!strings.Contains(e2.String(), "already active") || !strings.Contains(e2.String(), "keel cancel") {
			t.Errorf("run while active: status %d, stderr %q", code, e2.String())
		}

		o2.Reset()
		if code := keel(ctx, &o2, &e2, withConn("cancel", "e2e-cancel")...); code != exitOK ||
			o2.String() != "cancellation of e2e-cancel/run-1 requested\n" {
			t.Errorf("cancel: status %d, stdout %q, stderr %q", code, o2.String(), e2.String())
		}
		select {
		case code := <-done:
			if code != exitCancelled {
				t.Errorf("exit status %d, want %d\n%s", code, exitCancelled, errOut.String())
			}
		case <-ctx.Done():
			t.Fatal("keel run did not end after the cancel")
		}
		for _, want := range []string{"└ ⊘ sleep interrupted", "⊘ cancelled (session revision 1)"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("output lacks %q:\n%s", want, out.String())
			}
		}

		// The session may not have recorded the run's end yet; either way
		// there is nothing left to cancel.
		o2.Reset()
		if code := keel(ctx, &o2, &e2, withConn("cancel", "e2e-cancel")...); code != exitOK || !strings.Contains(o2.String(), "nothing to cancel") {
			t.Errorf("cancel with no active run: status %d, stdout %q", code, o2.String())
		}
	})

	t.Run("detach_and_follow", func(t *testing.T) {
		model := writeScript(t, `{"turns":[{"tool_calls":[{"id":"z","name":"sleep","arguments":{"seconds":3600}}]},{"text":["woke"]}]}`)
		// Ctrl-C while following: keel run returns, the run goes on.
		runCtx, interrupt := context.WithCancel(ctx)
		defer interrupt()
		_, errOut, done := inBackground(t, ctx, "┌ sleep", func(stdout, stderr io.Writer) int {
			return dispatch(runCtx, withConn("run", "--session", "e2e-detach", "--model", model, "--tools", "sleep", "nap"), stdout, stderr)
		})
		interrupt()
		if code := <-done; code != exitDetached {
			t.Errorf("exit status %d after Ctrl-C, want %d", code, exitDetached)
		}
		if !strings.Contains(errOut.String(), "keel events e2e-detach --follow") {
			t.Errorf("no hint on how to get back to the run: %q", errOut.String())
		}

		// Follow the session from the start: replay, then live until the
		// cancel (sent by run number) arrives.
		followCtx, stopFollow := context.WithCancel(ctx)
		defer stopFollow()
		follow := newWatchWriter("run.cancelled")
		var followErr bytes.Buffer
		followed := make(chan int, 1)
		go func() {
			followed <- dispatch(followCtx, withConn("events", "--follow", "e2e-detach"), follow, &followErr)
		}()
		var o, e bytes.Buffer
		if code := keel(ctx, &o, &e, withConn("cancel", "--run", "1", "e2e-detach")...); code != exitOK {
			t.Fatalf("cancel --run 1: status %d: %s", code, e.String())
		}
		follow.wait(t, ctx)
		stopFollow()
		if code := <-followed; code != exitOK {
			t.Errorf("events --follow ended with status %d: %s", code, followErr.String())
		}
		if !regexp.MustCompile(`(?s)^#1 run\.started .*#\d+ tool\.finished sleep interrupted .*#\d+ run\.cancelled revision 1\n`).MatchString(follow.String()) {
			t.Errorf("follow output:\n%s", follow.String())
		}

		// Once the run has ended, cancelling it again changes nothing and
		// says so; a run that never existed is an error.
		kc, err := client.Dial(ctx, client.Options{Temporal: stack.temporal})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kc.Session("e2e-detach").Run(1).Outcome(ctx); !errors.Is(err, keelpkg.ErrCancelled) {
			t.Fatalf("outcome: %v, want cancelled", err)
		}
		o.Reset()
		if code := keel(ctx, &o, &e, withConn("cancel", "--run", "1", "e2e-detach")...); code != exitOK ||
			o.String() != "e2e-detach/run-1 already ended (cancelled); nothing to cancel\n" {
			t.Errorf("cancel of an ended run: status %d, stdout %q, stderr %q", code, o.String(), e.String())
		}
		e.Reset()
		if code := keel(ctx, &o, &e, withConn("cancel", "--run", "7", "e2e-detach")...); code != exitFailed || !strings.Contains(e.String(), "not found") {
			t.Errorf("cancel of a run that never existed: status %d, stderr %q", code, e.String())
		}
	})

	t.Run("steer_and_retract", func(t *testing.T) {
		// Steering staged while a tool batch runs cannot apply before the
		// batch ends, so retracting it always wins here.
		model := writeScript(t, `{"turns":[{"tool_calls":[{"id":"z","name":"sleep","arguments":{"seconds":3600}}]},{"text":["woke"]}]}`)
		var o, e bytes.Buffer
		if code := keel(ctx, &o, &e, withConn("send", "--session", "e2e-steer", "--model", model, "--tools", "sleep", "nap")...); code != exitOK {
			t.Fatalf("send: status %d: %s", code, e.String())
		}
		o.Reset()
		if code := keel(ctx, &o, &e, withConn("steer", "e2e-steer", "wake", "up")...); code != exitOK {
			t.Fatalf("steer: status %d: %s", code, e.String())
		}
		id := strings.TrimSpace(o.String())
		if id == "" || strings.ContainsAny(id, " \n") {
			t.Fatalf("steer printed %q, want one steering ID", o.String())
		}
		o.Reset()
		if code := keel(ctx, &o, &e, withConn("retract", "e2e-steer", id)...); code != exitOK || o.String() != "retracted\n" {
			t.Errorf("retract: status %d, stdout %q, stderr %q", code, o.String(), e.String())
		}
		o.Reset()
		if code := keel(ctx, &o, &e, withConn("retract", "e2e-steer", id)...); code != exitFailed || o.String() != "not_found\n" {
			t.Errorf("second retract: status %d, stdout %q", code, o.String())
		}
		if code := keel(ctx, &o, &e, withConn("cancel", "e2e-steer")...); code != exitOK {
			t.Errorf("cancel: status %d: %s", code, e.String())
		}
	})

	t.Run("respond", func(t *testing.T) {
		model := writeScript(t, `{"turns":[
		  {"tool_calls":[{"id":"q","name":"ask_user","arguments":{"question":"Proceed?"}}]},
		  {"text":["Thanks."]}]}`)
		out, errOut, done := inBackground(t, ctx, "waiting for an answer: keel respond e2e-ask ", func(stdout, stderr io.Writer) int {
			return dispatch(ctx, withConn("run", "--session", "e2e-ask", "--model", model, "--tools", "ask_user", "ask me"), stdout, stderr)
		})
		var o, e bytes.Buffer
		if code := keel(ctx, &o, &e, withConn("respond", "e2e-ask")...); code != exitOK || !strings.Contains(o.String(), "Proceed?") {
			t.Fatalf("respond (list): status %d, stdout %q, stderr %q", code, o.String(), e.String())
		}
		reqID := strings.Fields(o.String())[0]
		o.Reset()
		if code := keel(ctx, &o, &e, withConn("respond", "e2e-ask", reqID, "yes")...); code != exitOK {
			t.Fatalf("respond: status %d, stderr %q", code, e.String())
		}
		if code := <-done; code != exitOK {
			t.Fatalf("run: status %d\n%s\n%s", code, out.String(), errOut.String())
		}
		for _, want := range []string{"? Proceed?", "└ ✓ ask_user", "Thanks.", "✓ completed in 2 steps"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("output lacks %q:\n%s", want, out.String())
			}
		}
	})

	// toolResults returns the session's tool results by call ID.
	toolResults := func(t *testing.T, session string) map[string]keelpkg.Message {
		t.Helper()
		kc, err := client.Dial(ctx, client.Options{Temporal: stack.temporal})
		if err != nil {
			t.Fatal(err)
		}
		page, err := kc.Session(session).History(ctx, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]keelpkg.Message{}
		for _, m := range page.Messages {
			if m.ToolCallID != "" && m.Role == keelpkg.RoleTool {
				out[m.ToolCallID] = m
			}
		}
		return out
	}

	t.Run("answer_stdin", func(t *testing.T) {
		// The first answer does not match the schema: keel run says why
		// and asks again, and the second one is delivered.
		model := writeScript(t, `{"turns":[
		  {"tool_calls":[{"id":"q","name":"ask_user","arguments":{"question":"How many?","schema":{"type":"integer"}}}]},
		  {"text":["Got it."]}]}`)
		var out, errOut bytes.Buffer
		in := withStdin(ctx, strings.NewReader("many\n3\n"))
		code := keel(in, &out, &errOut, withConn("run", "--session", "e2e-answer", "--answer-stdin", "--model", model, "--tools", "ask_user", "ask")...)
		if code != exitOK {
			t.Fatalf("exit status %d\n%s\n%s", code, out.String(), errOut.String())
		}
		if !regexp.MustCompile(`\? How many\?\n  answer as JSON matching \{"type":"integer"\}\n› many\n` +
			`  not a valid answer: answer to "q/ask_user": [^\n]+\n› 3\n(?s:.*)└ ✓ ask_user[^\n]*\n  3\n(?s:.*)✓ completed in 2 steps`).MatchString(out.String()) {
			t.Errorf("dialogue not as expected:\n%s", out.String())
		}
		if strings.Contains(out.String(), "keel respond") {
			t.Errorf("answering here, yet told to answer elsewhere:\n%s", out.String())
		}
		if got := toolResults(t, "e2e-answer")["q"]; got.Content != "3" || got.ToolStatus != keelpkg.ToolOK {
			t.Errorf("the tool's result is %+v, want ok 3", got)
		}
	})

	t.Run("answer_several", func(t *testing.T) {
		// Two questions open at once are asked one after the other, in
		// the order the model asked them; the answers were typed ahead.
		model := writeScript(t, `{"turns":[
		  {"tool_calls":[{"id":"q1","name":"ask_user","arguments":{"question":"First?"}},
		                 {"id":"q2","name":"ask_user","arguments":{"question":"Second?"}}]},
		  {"text":["Done."]}]}`)
		var out, errOut bytes.Buffer
		in := withStdin(ctx, strings.NewReader("one\n{\"n\": 2}\n"))
		code := keel(in, &out, &errOut, withConn("run", "--session", "e2e-several", "--answer-stdin", "--model", model, "--tools", "ask_user", "ask")...)
		if code != exitOK {
			t.Fatalf("exit status %d\n%s\n%s", code, out.String(), errOut.String())
		}
		if !regexp.MustCompile(`\? First\?\n› one\n(?s:.*)\? Second\?\n› \{"n": 2\}\n`).MatchString(out.String()) {
			t.Errorf("questions not asked in order:\n%s", out.String())
		}
		got := toolResults(t, "e2e-several")
		if got["q1"].Content != "one" || got["q2"].Content != `{"n":2}` {
			t.Errorf("results: q1 %q, q2 %q; want one and {\"n\":2}", got["q1"].Content, got["q2"].Content)
		}
	})

	t.Run("approve_ask", func(t *testing.T) {
		// Both calls need approval: the first after an answer that is
		// neither y/n nor an approval object, the second is refused.
		model := writeScript(t, `{"turns":[
		  {"tool_calls":[{"id":"wa","name":"write_file","arguments":{"path":"approved.txt","content":"A"}},
		                 {"id":"wb","name":"write_file","arguments":{"path":"refused.txt","content":"B"}}]},
		  {"text":["Done."]}]}`)
		var out, errOut bytes.Buffer
		in := withStdin(ctx, strings.NewReader("maybe\ny\nno\n"))
		code := keel(in, &out, &errOut, withConn("run", "--session", "e2e-approve", "--answer-stdin", "--approve-ask", "write_file",
			"--model", model, "--tools", "write_file", "write")...)
		if code != exitOK {
			t.Fatalf("exit status %d\n%s\n%s", code, out.String(), errOut.String())
		}
		hint := `  answer y or n \(or JSON \{"approved": bool, "reason": "\.\.\."\}\)\n`
		if !regexp.MustCompile(`\? Allow tool write_file with arguments [^\n]*approved\.txt[^\n]*\n` + hint +
			`› maybe\n  not a valid answer: [^\n]+\n› y\n(?s:.*)` +
			`\? Allow tool write_file with arguments [^\n]*refused\.txt[^\n]*\n` + hint + `› no\n`).MatchString(out.String()) {
			t.Errorf("approval dialogue not as expected:\n%s", out.String())
		}
		if b, err := os.ReadFile(filepath.Join(workspace, "approved.txt")); err != nil || string(b) != "A" {
			t.Errorf("approved.txt: %q, %v; want it written", b, err)
		}
		if _, err := os.Stat(filepath.Join(workspace, "refused.txt")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("refused.txt: %v; want it never written", err)
		}
		got := toolResults(t, "e2e-approve")
		if got["wa"].ToolStatus != keelpkg.ToolOK || got["wb"].ToolStatus != keelpkg.ToolError ||
			!strings.Contains(got["wb"].Content, `the host denied tool "write_file"`) {
			t.Errorf("results: wa %+v, wb %+v", got["wa"], got["wb"])
		}
	})

	t.Run("answer_stdin_json", func(t *testing.T) {
		// With --json, stdout carries envelopes only; the dialogue goes
		// to stderr.
		model := writeScript(t, `{"turns":[
		  {"tool_calls":[{"id":"q","name":"ask_user","arguments":{"question":"Name?"}}]},
		  {"text":["Hi."]}]}`)
		var out, errOut bytes.Buffer
		in := withStdin(ctx, strings.NewReader("Ada\n"))
		code := keel(in, &out, &errOut, withConn("run", "--json", "--answer-stdin", "--model", model, "--tools", "ask_user", "ask")...)
		if code != exitOK {
			t.Fatalf("exit status %d\n%s\n%s", code, out.String(), errOut.String())
		}
		for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			var env keelpkg.Envelope
			if err := json.Unmarshal([]byte(l), &env); err != nil || env.Type == "" {
				t.Errorf("stdout line is not an envelope: %q (%v)", l, err)
			}
		}
		if !strings.Contains(errOut.String(), "? Name?\n› Ada\n") {
			t.Errorf("stderr lacks the dialogue:\n%s", errOut.String())
		}
	})

	t.Run("send", func(t *testing.T) {
		var out, errOut bytes.Buffer
		code := keel(ctx, &out, &errOut, withConn("send", "--session", "e2e-send", "--model", writeScript(t, `{"turns":[{"text":["ok"]}]}`), "hi")...)
		if code != exitOK {
			t.Fatalf("send: status %d: %s", code, errOut.String())
		}
		var got map[string]any
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatalf("send printed %q: %v", out.String(), err)
		}
		want := map[string]any{"session_id": "e2e-send", "run_id": "e2e-send/run-1", "number": 1.0, "revision": 0.0}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("send (-want +got):\n%s", diff)
		}
	})
}

// TestDevDemo runs `keel dev --demo` on free ports with a SQLite data
// directory, waits for the demo to finish, and shuts it down the way
// Ctrl-C does.
func TestDevDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	ctx, cancel := context.WithTimeout(withNoInput(context.Background()), 3*time.Minute)
	defer cancel()
	runCtx, interrupt := context.WithCancel(ctx)
	defer interrupt()
	dataDir := t.TempDir()
	out, errOut, done := inBackground(t, ctx, "Everything stays up until Ctrl-C.", func(stdout, stderr io.Writer) int {
		return cmdDev(runCtx, []string{"--data-dir", dataDir, "--port", "0", "--ui-port", "0", "--nats-port", "0", "--demo"}, stdout, stderr)
	})
	interrupt()
	var code int
	select {
	case code = <-done:
	case <-ctx.Done():
		t.Fatalf("keel dev did not stop:\n%s", out.String())
	}
	got := out.String()
	if code != exitOK {
		t.Fatalf("exit status %d\nstdout:\n%s\nstderr:\n%s", code, got, errOut.String())
	}
	for _, pattern := range []string{
		`Temporal gRPC  127\.0\.0\.1:\d+`,
		`Web UI         http://127\.0\.0\.1:\d+\n`,
		`NATS \(live\)    nats://127\.0\.0\.1:\d+  \(NKey in .+/nats\.nk\)\n`,
		`keel run --address 127\.0\.0\.1:\d+ --nats nats://127\.0\.0\.1:\d+ "Give me a tour of the workspace"`,
		`● run 1 · scripted:demo · session s-[0-9a-f]+\n`,
		`Hello! I'm keel's built-in demo agent\.`,
		`└ ✓ write_file`,
		`✓ completed in 5 steps\n`,
		`http://127\.0\.0\.1:\d+/namespaces/default/workflows/s-[0-9a-f]+\n`,
		`keel dev: stopped\.\n$`,
	} {
		if !regexp.MustCompile(pattern).MatchString(got) {
			t.Errorf("output does not match %q:\n%s", pattern, got)
		}
	}
	welcome, err := os.ReadFile(filepath.Join(dataDir, "workspace", "welcome.txt"))
	if err != nil || string(welcome) != scripted.DemoWelcome {
		t.Errorf("workspace not seeded with the demo's welcome.txt: %v", err)
	}
	for _, f := range []string{"temporal.db", "dev.log", devNATSSeedFile} {
		if _, err := os.Stat(filepath.Join(dataDir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
