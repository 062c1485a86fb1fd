//go:build unix

package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/provider"
	"github.com/keelrun/keel/server/provider/anthropic"
	"github.com/keelrun/keel/server/provider/openai"
	"github.com/keelrun/keel/server/provider/scripted"
)

// unknown asserts err is the unknown_model ProviderError that fails a run
// at once, with a message that contains want.
func unknown(t *testing.T, err error, want string) *keel.ProviderError {
	t.Helper()
	var pe *keel.ProviderError
	if !errors.As(err, &pe) || pe.Kind != keel.ProviderUnknownModel || pe.Retryable {
		t.Fatalf("error = %v, want a permanent unknown_model ProviderError", err)
	}
	if !strings.Contains(pe.Message, want) {
		t.Fatalf("message %q does not say %q", pe.Message, want)
	}
	return pe
}

func clearProviderEnv(t *testing.T) {
	for _, v := range []string{openai.EnvAPIKey, openai.EnvBaseURL, anthropic.EnvAPIKey, anthropic.EnvBaseURL} {
		t.Setenv(v, "")
	}
}

// spySource is a scripted.Source that records what it is asked.
type spySource struct {
	scripted.Source
	mu    sync.Mutex
	asked []string
}

func (s *spySource) note(call string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, call)
}

func (s *spySource) Has(name string) bool {
	s.note("has " + name)
	return s.Source.Has(name)
}

func (s *spySource) Script(name string) (*scripted.Script, error) {
	s.note("script " + name)
	return s.Source.Script(name)
}

func (s *spySource) calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.asked...)
}

// scriptsDir returns a scripts directory with ok.json, a FIFO pipe.json
// and what more names.
func scriptsDir(t *testing.T, more map[string]string) *scripted.Dir {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{"ok.json": `{"turns":[{"text":["ok"]}]}`}
	for k, v := range more {
		files[k] = v
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := scripted.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// With no declaration a worker offers the demo, its scripts, its named
// models and the providers its environment configures, and nothing else.
func TestDefaultOffer(t *testing.T) {
	clearProviderEnv(t)
	m := DefaultModels()
	for spec, want := range map[string]bool{
		"scripted:demo": true, "openai:gpt-4o": false, "anthropic:claude-x": false, "default": false, "gpt": false,
		"scripted:ok": false,
	} {
		if got := m.Admits(spec); got != want {
			t.Errorf("bare worker: Admits(%q) = %v, want %v", spec, got, want)
		}
	}
	if offer := m.Offer(); !strings.Contains(offer, "scripted:demo") || !strings.Contains(offer, openai.EnvAPIKey) {
		t.Errorf("Offer() = %q: want the demo and how to add a provider", offer)
	}

	t.Setenv(openai.EnvAPIKey, "sk-test") // the operator put it there
	t.Setenv(anthropic.EnvBaseURL, "http://localhost:9/v1")
	m = DefaultModels()
	m.Scripts = scriptsDir(t, nil)
	m.Named = map[string]NamedModel{"gpt": {Provider: scripted.New(scripted.Demo()), Model: "gpt-x"}}
	m.Default = "gpt"
	for spec, want := range map[string]bool{
		"scripted:demo": true, "scripted:ok": true, "openai:gpt-4o": true, "openai:qwen3:8b": true,
		"anthropic:claude-x": true, "default": true, "gpt": true,
		"openai:": false, "mistral:large": false, "scripted:pipe": false, "scripted:missing": false, "local": false,
	} {
		if got := m.Admits(spec); got != want {
			t.Errorf("configured worker: Admits(%q) = %v, want %v", spec, got, want)
		}
	}
	for spec, want := range map[string][2]string{
		"scripted:demo":      {"scripted", "demo"},
		"scripted:ok":        {"scripted", "ok"},
		"openai:qwen3:8b":    {"openai", "qwen3:8b"},
		"anthropic:claude-x": {"anthropic", "claude-x"},
		"default":            {"scripted", "gpt-x"},
	} {
		p, name, err := m.Resolve(spec)
		if err != nil {
			t.Fatalf("Resolve(%q): %v", spec, err)
		}
		if p.Name() != want[0] || name != want[1] {
			t.Errorf("Resolve(%q) = %s, %q; want %s, %q", spec, p.Name(), name, want[0], want[1])
		}
	}
	if offer := m.Offer(); offer != "default, gpt, scripted:demo, scripted:ok, anthropic:*, openai:*" {
		t.Errorf("Offer() = %q", offer)
	}
}

// The attack: specs that name files, paths out of the scripts directory,
// devices, FIFOs and providers the worker does not offer are refused
// with one message whatever the spec, and no file is opened: the source
// is not even asked about a name that is not a plain script name.
func TestResolveRefusesHostileSpecs(t *testing.T) {
	clearProviderEnv(t)
	spy := &spySource{Source: scriptsDir(t, nil)}
	m := DefaultModels()
	m.Scripts = spy
	fifo := filepath.Join(t.TempDir(), "outside.fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	hostile := []string{
		"scripted:/etc/passwd", "scripted:/etc/shadow", "scripted:../x", "scripted:../../etc/passwd",
		"scripted:/dev/zero", "scripted:" + fifo, "scripted:ok/../ok", "scripted:.hidden", "scripted:",
		"openai:invented", "anthropic:claude-x", "mistral:large", "gpt", "default", "", "scripted:ok\n",
		"openai:" + strings.Repeat("x", MaxModelSpecBytes),
	}
	var first string
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, spec := range hostile {
			if m.Admits(spec) {
				t.Errorf("Admits(%q) = true", spec)
			}
			_, _, err := m.Resolve(spec)
			pe := unknown(t, err, "not offered by this worker")
			if first == "" {
				first = pe.Message
			} else if pe.Message != first {
				t.Errorf("Resolve(%q) says %q, another spec %q: the message must not depend on the spec", spec, pe.Message, first)
			}
		}
	}()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("a refusal blocked (a FIFO or a device was opened)")
	}
	if strings.Contains(first, "passwd") || strings.Contains(first, "no such file") {
		t.Errorf("the refusal %q says something about a file", first)
	}
	if calls := spy.calls(); len(calls) > 0 {
		t.Errorf("the script source was asked %q", calls)
	}
}

// A FIFO or an oversize file inside the scripts directory is refused
// without blocking, and turns of other models go on meanwhile.
func TestScriptsDirFIFOAndOversize(t *testing.T) {
	clearProviderEnv(t)
	big := `{"turns":[{"text":["x"]}]}` + strings.Repeat(" ", scripted.MaxScriptBytes)
	m := DefaultModels()
	m.Scripts = scriptsDir(t, map[string]string{"big.json": big})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i, spec := range []string{"scripted:pipe", "scripted:big", "scripted:ok"} {
		wg.Go(func() { _, _, errs[i] = m.Resolve(spec) })
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("a turn blocked behind the FIFO")
	}
	unknown(t, errs[0], "not offered") // not a regular file: never offered
	pe := unknown(t, errs[1], "too large")
	if !strings.Contains(pe.Message, fmt.Sprint(scripted.MaxScriptBytes)) {
		t.Errorf("the oversize refusal %q does not name the limit", pe.Message)
	}
	if errs[2] != nil {
		t.Errorf("the other model's turn: %v", errs[2])
	}
}

// An operator's allow list is all the worker offers; patterns match the
// start of a spec; "default" goes with the model it names.
func TestAllowList(t *testing.T) {
	clearProviderEnv(t)
	t.Setenv(openai.EnvAPIKey, "sk-test")
	m := DefaultModels()
	m.Scripts = scriptsDir(t, map[string]string{"two.json": `{"turns":[{"text":["2"]}]}`})
	m.Named = map[string]NamedModel{"gpt": {Provider: scripted.New(scripted.Demo()), Model: "gpt-x"},
		"claude": {Provider: scripted.New(scripted.Demo()), Model: "c"}}
	m.Default = "gpt"
	m.Allow = []string{"gpt", "openai:gpt-4*", "scripted:o*"}
	for spec, want := range map[string]bool{
		"gpt": true, "default": true, "openai:gpt-4o": true, "openai:gpt-4.1-mini": true, "scripted:ok": true,
		"claude": false, "openai:o3": false, "scripted:demo": false, "scripted:two": false, "anthropic:x": false,
	} {
		if got := m.Admits(spec); got != want {
			t.Errorf("Admits(%q) = %v, want %v", spec, got, want)
		}
	}
	if _, _, err := m.Resolve("scripted:demo"); err == nil {
		t.Error("the demo resolved although the allow list leaves it out")
	}
	if offer := m.Offer(); offer != "gpt, openai:gpt-4*, scripted:o*" {
		t.Errorf("Offer() = %q", offer)
	}
	// A pattern whose provider the worker lacks offers nothing.
	m.Allow = []string{"anthropic:*"}
	if m.Admits("anthropic:x") || m.Offer() != "no models" {
		t.Errorf("anthropic:* without the provider: Admits %v, Offer %q", m.Admits("anthropic:x"), m.Offer())
	}
	m.Allow = []string{"*"}
	if !m.Admits("claude") || !m.Admits("scripted:two") || m.Admits("anthropic:x") {
		t.Error(`"*" does not offer exactly what the worker holds`)
	}
}

func TestCheckAllow(t *testing.T) {
	if err := CheckAllow([]string{"gpt", "default", "openai:*", "*", "scripted:demo", "openai:gpt-4*"}); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{"", "open*ai:x", "**", "a b", "x\n", strings.Repeat("x", MaxModelSpecBytes+1)} {
		if err := CheckAllow([]string{bad}); err == nil {
			t.Errorf("CheckAllow(%q) = nil", bad)
		}
	}
}

// The attack: a client invents 1,000 model names under an operator's
// openai:* pattern. The provider is built once, for its prefix, and the
// model labels stay within MaxModelLabels (plus "other"); a model the
// allow list names exactly keeps its own label.
func TestInventedModelsStayBounded(t *testing.T) {
	var builds atomic.Int32
	m := &Models{
		Factories: map[string]func() (provider.Provider, error){"openai": func() (provider.Provider, error) {
			builds.Add(1)
			return scripted.New(scripted.Demo()), nil
		}},
		Allow: []string{"openai:*", "openai:gpt-4o"},
	}
	labels := map[string]bool{}
	for i := range 1000 {
		spec := fmt.Sprintf("openai:x%d", i)
		_, model, err := m.Resolve(spec)
		if err != nil {
			t.Fatal(err)
		}
		labels[m.ModelLabel(spec, model)] = true
	}
	if n := builds.Load(); n != 1 {
		t.Errorf("the factory ran %d times, want once", n)
	}
	m.mu.Lock()
	cached, kept := len(m.providers), len(m.labels)
	m.mu.Unlock()
	if cached != 1 || kept > MaxModelLabels {
		t.Errorf("%d providers and %d labels kept, want 1 and at most %d", cached, kept, MaxModelLabels)
	}
	if len(labels) != MaxModelLabels+1 || !labels[OtherModelLabel] {
		t.Errorf("%d distinct labels, want %d and %q", len(labels), MaxModelLabels+1, OtherModelLabel)
	}
	if got := m.ModelLabel("openai:gpt-4o", "gpt-4o"); got != "gpt-4o" {
		t.Errorf("an exactly allowed model is labelled %q", got)
	}
}

// A factory that fails is tried again on the next use; one that works is
// built once and serves every model of its prefix.
func TestResolveFactories(t *testing.T) {
	var builds atomic.Int32
	fail := true
	m := &Models{Factories: map[string]func() (provider.Provider, error){
		"echo": func() (provider.Provider, error) {
			builds.Add(1)
			if fail {
				return nil, errors.New("echo is down")
			}
			return scripted.New(scripted.Demo()), nil
		},
	}}
	_, _, err := m.Resolve("echo:v1")
	unknown(t, err, "echo is down")
	fail = false
	for _, spec := range []string{"echo:v1", "echo:v2", "echo:v1"} {
		if _, name, err := m.Resolve(spec); err != nil || name != strings.TrimPrefix(spec, "echo:") {
			t.Fatalf("Resolve(%s) = %q, %v", spec, name, err)
		}
	}
	if n := builds.Load(); n != 2 {
		t.Errorf("the factory ran %d times, want twice (a failure, then once)", n)
	}
	if _, _, err := m.Resolve("scripted:demo"); err != nil {
		t.Fatal(err)
	}
	_, _, err = m.Resolve("openai:gpt-4o")
	unknown(t, err, "not offered")
}
