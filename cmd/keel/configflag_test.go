package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// keel worker and keel dev refuse a bad keel.yaml before they start
// anything, naming the file, line and field, and never echo a key.
func TestConfigRefusedAtStart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "keel.yaml")
	bad := "models:\n  gpt:\n    provider: openai\n    model: gpt-4.1\n    api_key: sk-live-abcdef0123456789\nlimits:\n  max_steps: 0\n"
	if err := os.WriteFile(file, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		// --address points nowhere: the file is refused before any dial.
		{"worker", "--config", file, "--address", "127.0.0.1:1"},
		{"dev", "--config", file, "--data-dir", filepath.Join(t.TempDir(), "data")},
	} {
		t.Run(args[0], func(t *testing.T) {
			code, stdout, stderr := call(t, args...)
			if code != exitFailed {
				t.Errorf("exit status %d, want %d", code, exitFailed)
			}
			for _, want := range []string{
				file + ":5:5: models.gpt.api_key: keys and secrets never go in the configuration file",
				file + ":7:14: limits.max_steps: must be at least 1, got 0",
			} {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr %q does not contain %q", stderr, want)
				}
			}
			if strings.Contains(stderr+stdout, "sk-live") {
				t.Error("the key was echoed")
			}
		})
	}
}
