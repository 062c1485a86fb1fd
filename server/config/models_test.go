package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/config"
	"github.com/keelrun/keel/server/provider"
	"github.com/keelrun/keel/server/provider/openai"
	"github.com/keelrun/keel/server/provider/scripted"
	"github.com/keelrun/keel/server/worker"
)

// keelFile writes a keel.yaml (and the files it names) in a directory of
// its own and loads it.
func keelFile(t *testing.T, yaml string, files map[string]string) *config.Config {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(dir, "keel.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// scripts: (relative to the file) and allow_models reach the worker's
// catalogue: the file's scripts are offered by name, and only what the
// list matches is offered.
func TestApplyScriptsAndAllowModels(t *testing.T) {
	t.Setenv(openai.EnvAPIKey, "")
	t.Setenv(openai.EnvBaseURL, "")
	cfg := keelFile(t, `models:
  demo2:
    provider: scripted
    model: demo
scripts: ./my-scripts
allow_models: [demo2, "scripted:h*"]
`, map[string]string{"my-scripts/hello.json": `{"turns":[{"text":["hi"]}]}`,
		"my-scripts/other.json": `{"turns":[{"text":["no"]}]}`})
	opts := worker.Options{}
	if err := cfg.Apply(&opts); err != nil {
		t.Fatal(err)
	}
	m, ok := opts.Models.(*worker.Models)
	if !ok {
		t.Fatalf("Apply set Models to %T, want *worker.Models", opts.Models)
	}
	for spec, want := range map[string]bool{
		"demo2": true, "default": true, "scripted:hello": true,
		"scripted:other": false, "scripted:demo": false, "openai:gpt-4o": false, "scripted:../keel": false,
	} {
		if got := m.Admits(spec); got != want {
			t.Errorf("Admits(%q) = %v, want %v", spec, got, want)
		}
	}
	if _, name, err := m.Resolve("scripted:hello"); err != nil || name != "hello" {
		t.Errorf("Resolve(scripted:hello) = %q, %v", name, err)
	}
}

// A --scripts flag (scripts already on the catalogue) wins over the
// file's, and --allow-model adds to allow_models.
func TestApplyKeepsTheFlags(t *testing.T) {
	cfg := keelFile(t, "scripts: ./nowhere\nallow_models: [\"scripted:demo\"]\n", nil)
	m := &worker.Models{Allow: []string{"scripted:flag"}}
	lib := &stubSource{}
	m.Scripts = lib
	opts := worker.Options{Models: m}
	if err := cfg.Apply(&opts); err != nil {
		t.Fatalf("Apply opened the file's scripts although the flag gave some: %v", err)
	}
	if m.Scripts != lib || strings.Join(m.Allow, ",") != "scripted:flag,scripted:demo" {
		t.Errorf("Scripts %v, Allow %v", m.Scripts, m.Allow)
	}
}

// A scripts directory that does not exist fails Apply at its place.
func TestApplyMissingScripts(t *testing.T) {
	cfg := keelFile(t, "workspace: ws\nscripts: ./nowhere\n", nil)
	err := cfg.Apply(&worker.Options{})
	var e *config.Error
	if !errors.As(err, &e) || e.Field != "scripts" || e.Line != 2 || e.Column != 10 {
		t.Fatalf("Apply: %v, want an error at scripts (2:10)", err)
	}
}

// A program's own resolver cannot take the file's models.
func TestApplyOwnResolver(t *testing.T) {
	cfg := keelFile(t, "allow_models: [gpt]\n", nil)
	err := cfg.Apply(&worker.Options{Models: ownResolver{}})
	if err == nil || !strings.Contains(err.Error(), "*worker.Models") {
		t.Fatalf("Apply: %v", err)
	}
	cfg = keelFile(t, "workspace: ws\n", nil)
	opts := worker.Options{Models: ownResolver{}}
	if err := cfg.Apply(&opts); err != nil {
		t.Fatalf("a file without models: %v", err)
	}
	if _, ok := opts.Models.(ownResolver); !ok {
		t.Errorf("Apply replaced the program's resolver with %T", opts.Models)
	}
}

type ownResolver struct{}

func (ownResolver) Resolve(string) (provider.Provider, string, error) {
	return nil, "", errors.New("none")
}

type stubSource struct{}

func (*stubSource) Has(string) bool { return false }

func (*stubSource) Script(string) (*scripted.Script, error) { return nil, errors.New("none") }

func (*stubSource) Names(int) ([]string, bool) { return nil, false }

// A model's reasoning and hosted tools reach its provider; a model that
// cannot take its reasoning, or an unknown hosted tool, is refused where
// the file names it.
func TestModelReasoningAndHostedTools(t *testing.T) {
	t.Setenv("KEEL_TEST_ANTHROPIC_KEY", "sk-ant-x")
	ok := keelFile(t, "models:\n  thinker:\n    provider: anthropic\n    model: claude-sonnet-4-5\n    api_key_env: KEEL_TEST_ANTHROPIC_KEY\n"+
		"    reasoning: {effort: high}\n    hosted_tools: [web_search]\n"+
		"  gpt:\n    provider: openai\n    api: responses\n    model: gpt-5\n    api_key_env: KEEL_TEST_ANTHROPIC_KEY\n"+
		"    reasoning: {effort: medium}\n    hosted_tools: [web_search, file_search]\n    vector_stores: [vs_1]\n", nil)
	var m worker.Models
	if err := ok.AddModels(&m); err != nil {
		t.Fatal(err)
	}
	if err := m.CheckReasoning("thinker", keel.Reasoning{Effort: keel.ReasoningLow}); err != nil {
		t.Errorf("a thinking model refuses reasoning: %v", err)
	}
	if err := m.CheckReasoning("gpt", keel.Reasoning{BudgetTokens: 4096}); err == nil {
		t.Error("an OpenAI model took a thinking budget")
	}
	// A compatible server reads what its entry declares, and nothing else.
	local := keelFile(t, "models:\n  vision:\n    provider: openai\n    base_url: http://localhost:11434/v1\n    model: qwen2.5vl\n    inputs: [image]\n"+
		"  text:\n    provider: openai\n    base_url: http://localhost:11434/v1\n    model: qwen3\n", nil)
	var lm worker.Models
	if err := local.AddModels(&lm); err != nil {
		t.Fatal(err)
	}
	if err := lm.CheckInputs("vision", []keel.AttachmentKind{keel.AttachmentImage}); err != nil {
		t.Errorf("declared images refused: %v", err)
	}
	for spec, kinds := range map[string][]keel.AttachmentKind{"vision": {keel.AttachmentDocument}, "text": {keel.AttachmentImage}} {
		if err := lm.CheckInputs(spec, kinds); err == nil {
			t.Errorf("%s read %v", spec, kinds)
		}
	}
	for _, c := range []struct{ field, yaml string }{
		{"models.old.reasoning", "models:\n  old:\n    provider: anthropic\n    model: claude-3-5-haiku-latest\n    api_key_env: KEEL_TEST_ANTHROPIC_KEY\n    reasoning: {effort: low}\n"},
		{"models.old", "models:\n  old:\n    provider: anthropic\n    model: claude-sonnet-4-5\n    api_key_env: KEEL_TEST_ANTHROPIC_KEY\n    hosted_tools: [browser]\n"},
		{"models.gpt", "models:\n  gpt:\n    provider: openai\n    model: gpt-5\n    api_key_env: KEEL_TEST_ANTHROPIC_KEY\n    hosted_tools: [web_search]\n"},
		{"models.gpt", "models:\n  gpt:\n    provider: openai\n    model: gpt-5\n    api_key_env: KEEL_TEST_ANTHROPIC_KEY\n    reasoning: {budget_tokens: 2048}\n"},
	} {
		err := keelFile(t, c.yaml, nil).AddModels(&worker.Models{})
		var errs config.Errors
		if !errors.As(err, &errs) || len(errs) != 1 || errs[0].Field != c.field {
			t.Errorf("%s: error %v", c.field, err)
		}
	}
}
