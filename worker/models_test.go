package worker

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/provider"
	"github.com/keelrun/keel/provider/anthropic"
	"github.com/keelrun/keel/provider/openai"
	"github.com/keelrun/keel/provider/scripted"
)

// unknown asserts err is the unknown_model ProviderError that fails a run
// at once, with a message that contains want.
func unknown(t *testing.T, err error, want string) {
	t.Helper()
	var pe *keel.ProviderError
	if !errors.As(err, &pe) || pe.Kind != keel.ProviderUnknownModel || pe.Retryable {
		t.Fatalf("error = %v, want a permanent unknown_model ProviderError", err)
	}
	if !strings.Contains(pe.Message, want) {
		t.Fatalf("message %q does not say %q", pe.Message, want)
	}
}

func TestResolveSpecs(t *testing.T) {
	script := filepath.Join(t.TempDir(), "s.json")
	if err := os.WriteFile(script, []byte(`{"turns":[{"text":["hi"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(openai.EnvBaseURL, "http://localhost:11434/v1") // local: no key needed
	t.Setenv(openai.EnvAPIKey, "")
	t.Setenv(anthropic.EnvBaseURL, "")
	t.Setenv(anthropic.EnvAPIKey, "sk-ant-test")
	m := DefaultModels()
	for spec, want := range map[string][2]string{
		"scripted:demo":           {"scripted", "demo"},
		"scripted:" + script:      {"scripted", script},
		"openai:qwen3:8b":         {"openai", "qwen3:8b"},
		"anthropic:claude-test-1": {"anthropic", "claude-test-1"},
	} {
		p, name, err := m.Resolve(spec)
		if err != nil {
			t.Fatalf("Resolve(%q): %v", spec, err)
		}
		if p.Name() != want[0] || name != want[1] {
			t.Errorf("Resolve(%q) = %s, %q; want %s, %q", spec, p.Name(), name, want[0], want[1])
		}
		again, _, _ := m.Resolve(spec)
		if again != p {
			t.Errorf("Resolve(%q) built a second provider", spec)
		}
	}
}

func TestResolveRefusals(t *testing.T) {
	t.Setenv(openai.EnvBaseURL, "")
	t.Setenv(openai.EnvAPIKey, "")
	m := DefaultModels()
	for spec, want := range map[string]string{
		"gpt-4o":                             `want "scripted:demo"`,
		"openai:":                            `want "scripted:demo"`,
		"mistral:large":                      `no provider "mistral"`,
		"openai:gpt-4o":                      openai.ErrNoAPIKey.Error(),
		"scripted:/no/such/script-file.json": "no such file",
	} {
		_, _, err := m.Resolve(spec)
		unknown(t, err, want)
	}
	// A refusal is not cached: the same spec works once it can.
	t.Setenv(openai.EnvAPIKey, "sk-test")
	if _, _, err := m.Resolve("openai:gpt-4o"); err != nil {
		t.Fatalf("after the key was set: %v", err)
	}
}

// A worker's own factories serve their prefixes; the scripted provider
// stays built in.
func TestResolveCustomFactory(t *testing.T) {
	built := 0
	m := &Models{Factories: map[string]func() (provider.Provider, error){
		"echo": func() (provider.Provider, error) {
			built++
			return scripted.New(scripted.Demo()), nil
		},
	}}
	for range 3 {
		if _, name, err := m.Resolve("echo:v1"); err != nil || name != "v1" {
			t.Fatalf("Resolve(echo:v1) = %q, %v", name, err)
		}
	}
	if built != 1 {
		t.Errorf("factory ran %d times, want once", built)
	}
	if _, _, err := m.Resolve("scripted:demo"); err != nil {
		t.Fatal(err)
	}
	_, _, err := m.Resolve("openai:gpt-4o")
	unknown(t, err, `no provider "openai"`)
}
