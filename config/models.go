package config

import (
	"fmt"
	"os"
	"strings"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/activities"
	"github.com/keelrun/keel/provider"
	"github.com/keelrun/keel/provider/anthropic"
	"github.com/keelrun/keel/provider/openai"
	"github.com/keelrun/keel/provider/scripted"
)

// Models resolves a file's named models, "default", and every other spec
// ("openai:MODEL", "scripted:FILE.json", ...) through Specs. It implements
// activities.ModelResolver.
type Models struct {
	// Specs resolves specs that name no model of the file (they hold a
	// ':'). Default: worker.DefaultModels() (Apply sets it).
	Specs activities.ModelResolver

	named map[string]resolved
	names []string
	def   string
}

var _ activities.ModelResolver = (*Models)(nil)

type resolved struct {
	p     provider.Provider
	model string
}

// Resolve returns the provider and model name for spec: a model name of
// the file, "default" for the default model, or a spec for Specs.
func (m *Models) Resolve(spec string) (provider.Provider, string, error) {
	if strings.Contains(spec, ":") {
		if m.Specs == nil {
			return nil, "", unknownModel(spec, "this worker resolves only the models of its configuration file")
		}
		return m.Specs.Resolve(spec)
	}
	name := spec
	if name == DefaultModelSpec {
		if m.def == "" {
			return nil, "", unknownModel(spec, "this worker's configuration names no model")
		}
		name = m.def
	}
	r, ok := m.named[name]
	if !ok {
		return nil, "", unknownModel(spec, fmt.Sprintf("this worker's models are %s", strings.Join(m.names, ", ")))
	}
	return r.p, r.model, nil
}

func unknownModel(spec, why string) *keel.ProviderError {
	return &keel.ProviderError{Provider: "keel", Kind: keel.ProviderUnknownModel,
		Message: fmt.Sprintf("model %q: %s", spec, why)}
}

// NewModels builds the providers of the file's models, reading their keys
// from the environment now: a missing key or a bad endpoint is an *Error
// naming the model's place in the file.
func (c *Config) NewModels() (*Models, error) {
	m := &Models{named: map[string]resolved{}, def: c.DefaultModel}
	if m.def == "" && len(c.Models) > 0 {
		m.def = c.Models[0].Name
	}
	var errs Errors
	for _, model := range c.Models {
		p, err := c.newProvider(model)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		m.named[model.Name] = resolved{p: p, model: model.Model}
		m.names = append(m.names, model.Name)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return m, nil
}

func (c *Config) newProvider(m Model) (provider.Provider, *Error) {
	field := "models." + m.Name
	key := ""
	if m.APIKeyEnv != "" {
		if key = os.Getenv(m.APIKeyEnv); key == "" {
			return nil, c.errorAt(field+".api_key_env", "the environment variable %s is not set", m.APIKeyEnv)
		}
	}
	var p provider.Provider
	var err error
	switch m.Provider {
	case ProviderOpenAI:
		p, err = openai.New(openai.Config{BaseURL: m.BaseURL, APIKey: key, MaxTokens: m.MaxTokens})
	case ProviderAnthropic:
		p, err = anthropic.New(anthropic.Config{BaseURL: m.BaseURL, APIKey: key, MaxTokens: m.MaxTokens})
	case ProviderScripted:
		s := scripted.Demo()
		if m.Model != "demo" {
			s, err = scripted.Load(m.Model)
		}
		if err == nil {
			p = scripted.New(s)
		}
	default:
		return nil, c.errorAt(field+".provider", "unknown provider %q", m.Provider)
	}
	if err != nil {
		return nil, c.errorAt(field, "%v", err)
	}
	return p, nil
}
