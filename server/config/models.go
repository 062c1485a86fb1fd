package config

import (
	"maps"
	"os"
	"slices"

	"github.com/keelrun/keel/server/provider"
	"github.com/keelrun/keel/server/provider/anthropic"
	"github.com/keelrun/keel/server/provider/openai"
	"github.com/keelrun/keel/server/provider/scripted"
	"github.com/keelrun/keel/server/worker"
)

// AddModels adds to the worker's model catalogue m what the file
// declares about models: the named models (their providers built now,
// their keys read now: a missing key or a bad endpoint is an *Error naming
// the model's place in the file), default_model (default: the first
// model), the scripts directory unless m already has scripts (a --scripts
// flag wins), and allow_models, added to m.Allow.
func (c *Config) AddModels(m *worker.Models) error {
	var errs Errors
	named := maps.Clone(m.Named)
	if named == nil && len(c.Models) > 0 {
		named = map[string]worker.NamedModel{}
	}
	for _, model := range c.Models {
		p, err := c.newProvider(model)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		named[model.Name] = worker.NamedModel{Provider: p, Model: model.Model}
	}
	var scripts scripted.Source
	if m.Scripts == nil && c.Scripts != "" {
		dir, err := scripted.OpenDir(c.Scripts)
		if err != nil {
			errs = append(errs, c.errorAt("scripts", "%v", err))
		} else {
			scripts = dir
		}
	}
	if len(errs) > 0 {
		if dir, ok := scripts.(*scripted.Dir); ok {
			_ = dir.Close()
		}
		return errs
	}
	m.Named = named
	if len(c.Models) > 0 {
		m.Default = c.DefaultModel
		if m.Default == "" {
			m.Default = c.Models[0].Name
		}
	}
	if scripts != nil {
		m.Scripts = scripts
	}
	if c.AllowModels != nil {
		allow := slices.Clone(m.Allow)
		for _, a := range c.AllowModels {
			if !slices.Contains(allow, a) {
				allow = append(allow, a)
			}
		}
		m.Allow = allow
	}
	return nil
}

// declaresModels reports whether the file says anything about models.
func (c *Config) declaresModels() bool {
	return len(c.Models) > 0 || c.Scripts != "" || c.AllowModels != nil
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
		p, err = openai.New(openai.Config{BaseURL: m.BaseURL, APIKey: key, MaxTokens: m.MaxTokens, API: m.API,
			HostedTools: m.HostedTools, VectorStoreIDs: m.VectorStores, Reasoning: m.Reasoning, Inputs: m.Inputs})
	case ProviderAnthropic:
		p, err = anthropic.New(anthropic.Config{BaseURL: m.BaseURL, APIKey: key, MaxTokens: m.MaxTokens,
			Reasoning: m.Reasoning, HostedTools: m.HostedTools, Inputs: m.Inputs})
	case ProviderScripted:
		s := scripted.Demo()
		if m.Model != scripted.DemoName {
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
	if err := provider.CheckReasoning(p, m.Model, m.Reasoning); err != nil {
		return nil, c.errorAt(field+".reasoning", "%v", err)
	}
	return p, nil
}
