package worker

import (
	"github.com/keelrun/keel/server/provider"
	"github.com/keelrun/keel/server/provider/anthropic"
	"github.com/keelrun/keel/server/provider/openai"
)

// DefaultModels returns a catalogue with the built-in demo
// ("scripted:demo") and the providers the worker's environment configures,
// read now: "openai:MODEL" when OPENAI_API_KEY or OPENAI_BASE_URL is set
// (any OpenAI-compatible server), "anthropic:MODEL" when ANTHROPIC_API_KEY
// or ANTHROPIC_BASE_URL is. The operator put them there; a provider the
// environment does not name is not offered. A provider whose
// configuration is unusable (a bad base URL) fails the runs that ask for
// it with a clear unknown_model error. Set Scripts, Named and Allow on the
// result to offer more, or less.
func DefaultModels() *Models {
	m := &Models{Factories: map[string]func() (provider.Provider, error){}}
	if cfg := openai.FromEnv(); cfg.APIKey != "" || cfg.BaseURL != "" {
		m.Factories[openai.Name] = func() (provider.Provider, error) {
			p, err := openai.New(cfg)
			if err != nil {
				return nil, err
			}
			return p, nil
		}
	} else {
		m.hints = append(m.hints, openai.Name+":* once the worker has "+openai.EnvAPIKey+" or "+openai.EnvBaseURL)
	}
	if cfg := anthropic.FromEnv(); cfg.APIKey != "" || cfg.BaseURL != "" {
		m.Factories[anthropic.Name] = func() (provider.Provider, error) {
			p, err := anthropic.New(cfg)
			if err != nil {
				return nil, err
			}
			return p, nil
		}
	} else {
		m.hints = append(m.hints, anthropic.Name+":* once the worker has "+anthropic.EnvAPIKey+" or "+anthropic.EnvBaseURL)
	}
	return m
}
