package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// keel rerun runs a committed run again in a fork with another model, and
// keel compare shows the two side by side: the table, the tool calls and
// a diff of the final texts.
func TestRerunAndCompare(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	clearTemporalEnv(t)
	ctx, cancel := context.WithTimeout(withNoInput(context.Background()), 2*time.Minute)
	defer cancel()
	srv := startWorkerWithConfig(t, ctx, map[string]string{
		"usual.json": `{"repeat":true,"turns":[{"tool_calls":[{"id":"ls","name":"list_files","arguments":{}}]},` +
			`{"text":["Line one.\nThe usual model."]}]}`,
		"other.json": `{"repeat":true,"turns":[{"text":["Line one.\nThe other model."]}]}`,
		// A hostile model answers with terminal escapes: a screen clear,
		// a clipboard write (OSC 52) and a carriage return that would
		// overwrite the line before it.
		"hostile.json": `{"repeat":true,"turns":[{"text":["Line one.\n\u001b[2J\u001b]52;c;aGk=\u0007owned\rfake"]}]}`,
		"keel.yaml": "models:\n  usual:\n    provider: scripted\n    model: usual.json\n" +
			"  other:\n    provider: scripted\n    model: other.json\n" +
			"  hostile:\n    provider: scripted\n    model: hostile.json\ndefault_model: usual\nworkspace: .\n",
	})
	keel := func(want int, args ...string) (string, string) {
		t.Helper()
		args = append(args[:1:1], append([]string{"--address", srv.Address()}, args[1:]...)...)
		code, out, errOut := keelCmd(ctx, args...)
		if code != want {
			t.Fatalf("keel %s: status %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, want, out, errOut)
		}
		return out, errOut
	}
	keel(exitOK, "run", "--nats", "", "--session", "s1", "--model", "usual", "--tools", "list_files", "hi")

	out, errOut := keel(exitOK, "rerun", "--nats", "", "s1", "--run", "1", "--model", "other", "--into", "s1-other")
	if !strings.Contains(out, "The other model.") || !strings.Contains(errOut, "rerun of s1/run-1 in s1-other") {
		t.Fatalf("keel rerun:\nstdout:\n%s\nstderr:\n%s", out, errOut)
	}

	out, _ = keel(exitOK, "compare", "s1/run-1", "s1-other")
	t.Logf("keel compare s1/run-1 s1-other:\n%s", out)
	for _, want := range []string{
		"s1/run-1", "s1-other/run-1", "usual", "other",
		"tool calls of A (s1/run-1):", "list_files {} → ok:",
		"\n  Line one.\n- The usual model.\n+ The other model.\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("keel compare: no %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "tool calls of B") {
		t.Errorf("keel compare lists tool calls of B, which made none:\n%s", out)
	}

	keel(exitOK, "rerun", "--nats", "", "s1", "--run", "1", "--model", "hostile", "--into", "s1-hostile")
	out, _ = keel(exitOK, "compare", "s1/run-1", "s1-hostile")
	if strings.ContainsAny(out, "\x1b\x07\r") {
		t.Errorf("keel compare passes a model's control characters to the terminal: %q", out)
	}
	if !strings.Contains(out, "owned") {
		t.Errorf("keel compare drops the hostile run's text instead of showing it cleaned:\n%s", out)
	}

	// --tools: run 1 again on its own model with read_file only; the
	// model calls list_files, which the rerun does not offer.
	_, errOut = keel(exitOK, "rerun", "--nats", "", "s1", "--run", "1", "--tools", "read_file", "--into", "s1-tools")
	if !strings.Contains(errOut, "model usual") {
		t.Errorf("keel rerun without --model runs on run 1's model: %s", errOut)
	}
	out, _ = keel(exitOK, "compare", "s1/run-1", "s1-tools")
	t.Logf("keel compare s1/run-1 s1-tools:\n%s", out)
	_, b, _ := strings.Cut(out, "tool calls of B (s1-tools/run-1):")
	if !strings.Contains(b, "list_files {} → unavailable") || strings.Contains(b, "→ ok") {
		t.Errorf("keel compare: the rerun's list_files is not unavailable:\n%s", out)
	}

	_, errOut = keel(exitFailed, "rerun", "--nats", "", "s1", "--run", "5")
	if !strings.Contains(errOut, "no run 5") {
		t.Errorf("keel rerun --run 5: %s", errOut)
	}
	keel(exitUsage, "compare", "s1/run-x", "s1")
	keel(exitUsage, "rerun", "s1")
}
