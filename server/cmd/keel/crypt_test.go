package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"
	"go.uber.org/zap/zapcore"
	"google.golang.org/protobuf/proto"
)

// keel dev with --encryption-key-file: `keel run` given the key file
// sends its prompt encrypted, the raw histories hold none of the prompt,
// the tool result or the answer, and `keel history` and `keel events`
// show them all, whether they read through the codec endpoint or with the
// key file and the store. Without either they fail and print no plaintext.
func TestEncryptedDev(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	ctx, cancel := context.WithTimeout(withNoInput(context.Background()), 2*time.Minute)
	defer cancel()
	const (
		prompt   = "PROMPT-77e1a0"
		result   = "RESULT-91c3b2"
		response = "RESPONSE-4d5e6f"
	)
	markers := []string{prompt, result, response}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	keyFile := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keyFile, []byte("dev-1 "+base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	workspace, storeDir := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(workspace, "notes.txt"), []byte(result), 0o644); err != nil {
		t.Fatal(err)
	}
	stack, err := startDevStack(ctx, devConfig{scripts: testScripts(), noUI: true, workspace: workspace, store: "file://" + storeDir,
		logger: quietLogger(), logLevel: zapcore.ErrorLevel, crypt: devCryptFlags{keyFile: keyFile}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stack.stop() }()
	if got := stack.codecFlag(); !strings.Contains(got, "--encryption-key-file "+keyFile) {
		t.Errorf("the flags keel dev suggests (%q) do not pass the key file on", got)
	}
	model := writeScript(t, `{"turns":[{"tool_calls":[{"id":"r","name":"read_file","arguments":{"path":"notes.txt"}}]},{"text":["`+response+`"]}]}`)
	keel := func(args ...string) (string, string, int) {
		var out, errOut bytes.Buffer
		code := dispatch(ctx, append([]string{args[0], "--address", stack.server.Address()}, args[1:]...), &out, &errOut)
		return out.String(), errOut.String(), code
	}
	if out, errOut, code := keel("run", "--nats", "", "--codec-endpoint", stack.codecURL, "--encryption-key-file", keyFile,
		"--session", "enc", "--model", model, "--tools", "read_file", "look "+prompt); code != exitOK || !strings.Contains(out, response) {
		t.Fatalf("run: status %d\n%s\n%s", code, out, errOut)
	}

	plain, err := stack.server.Dial(ctx, sdkclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	// The run's execution closes once it continued as new; then both are
	// listed.
	first, err := firstExecution(ctx, plain, "enc")
	if err == nil {
		err = waitClosed(ctx, plain, "enc", first)
	}
	if err != nil {
		t.Fatal(err)
	}
	var list *workflowservice.ListWorkflowExecutionsResponse
	tick := time.NewTicker(20 * time.Millisecond) // visibility catches up with the close
	defer tick.Stop()
	for {
		list, err = plain.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: stack.server.Namespace()})
		if err == nil && len(list.GetExecutions()) >= 2 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("list workflows: %v (%d)", err, len(list.GetExecutions()))
		case <-tick.C:
		}
	}
	for _, ex := range list.GetExecutions() {
		it := plain.GetWorkflowHistory(ctx, ex.GetExecution().GetWorkflowId(), ex.GetExecution().GetRunId(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := proto.Marshal(ev)
			for _, m := range markers {
				if bytes.Contains(raw, []byte(m)) {
					t.Errorf("%s event %d (%s) holds %s in the clear", ex.GetExecution().GetWorkflowId(), ev.GetEventId(), ev.GetEventType(), m)
				}
			}
		}
	}

	for name, flags := range map[string][]string{
		"through the codec endpoint": {"--codec-endpoint", stack.codecURL, "--encryption-key-file", ""},
		"with the key file":          {"--codec-endpoint", "", "--store", "file://" + storeDir, "--encryption-key-file", keyFile},
	} {
		for _, cmd := range []string{"history", "events"} {
			args := append(append([]string{cmd}, flags...), "enc")
			if cmd == "events" {
				args = append([]string{cmd, "--nats", ""}, append(flags, "enc")...)
			}
			out, errOut, code := keel(args...)
			if code != exitOK {
				t.Errorf("%s %s: status %d: %s", cmd, name, code, errOut)
				continue
			}
			for _, m := range markers {
				if !strings.Contains(out, m) {
					t.Errorf("%s %s lacks %s:\n%s", cmd, name, m, out)
				}
			}
		}
	}
	out, errOut, code := keel("history", "--codec-endpoint", "", "--encryption-key-file", "", "enc")
	if code == exitOK {
		t.Errorf("history without a codec: status 0\n%s", out)
	}
	for _, m := range markers {
		if strings.Contains(out+errOut, m) {
			t.Errorf("history without a codec printed %s:\n%s%s", m, out, errOut)
		}
	}
	t.Logf("history without a codec: %s", strings.TrimSpace(errOut))
}
