package worker

import (
	"fmt"
	"strings"
	"sync"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/provider"
	"github.com/keelrun/keel/provider/scripted"
)

// Models resolves model specs to providers on the worker, where the API
// keys are. Specs: "scripted:demo" (the built-in demo), "scripted:FILE.json",
// "openai:MODEL", "anthropic:MODEL". Providers are built once per spec.
type Models struct {
	// Factories builds providers by prefix ("openai", "anthropic"). Optional;
	// DefaultModels fills it from the environment.
	Factories map[string]func() (provider.Provider, error)

	mu    sync.Mutex
	cache map[string]provider.Provider
}

// Resolve returns the provider for spec and the model name to ask it for.
// An unknown or unusable spec is a *keel.ProviderError of kind
// unknown_model, which fails the run at once.
func (m *Models) Resolve(spec string) (provider.Provider, string, error) {
	prefix, name, ok := strings.Cut(spec, ":")
	if !ok || name == "" {
		return nil, "", unknownModel(spec, `want "scripted:demo", "scripted:FILE.json", "openai:MODEL" or "anthropic:MODEL"`)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.cache[spec]; ok {
		return p, name, nil
	}
	var p provider.Provider
	switch prefix {
	case "scripted":
		s := scripted.Demo()
		if name != "demo" {
			var err error
			if s, err = scripted.Load(name); err != nil {
				return nil, "", unknownModel(spec, err.Error())
			}
		}
		p = scripted.New(s)
	default:
		mk, ok := m.Factories[prefix]
		if !ok {
			return nil, "", unknownModel(spec, fmt.Sprintf("no provider %q on this worker", prefix))
		}
		var err error
		if p, err = mk(); err != nil {
			return nil, "", unknownModel(spec, err.Error())
		}
	}
	if m.cache == nil {
		m.cache = map[string]provider.Provider{}
	}
	m.cache[spec] = p
	return p, name, nil
}

func unknownModel(spec, why string) *keel.ProviderError {
	return &keel.ProviderError{Provider: "keel", Kind: keel.ProviderUnknownModel,
		Message: fmt.Sprintf("model %q: %s", spec, why)}
}
