package worker

import (
	"github.com/keelrun/keel/provider"
	"github.com/keelrun/keel/provider/anthropic"
	"github.com/keelrun/keel/provider/openai"
)

// DefaultModels returns a resolver with the scripted provider and the
// OpenAI-compatible and Anthropic providers configured from the worker's
// environment (OPENAI_API_KEY, OPENAI_BASE_URL, ANTHROPIC_API_KEY,
// ANTHROPIC_BASE_URL). A provider whose configuration is unusable fails the
// runs that ask for it with a clear unknown_model error.
func DefaultModels() *Models {
	return &Models{Factories: map[string]func() (provider.Provider, error){
		openai.Name: func() (provider.Provider, error) {
			p, err := openai.New(openai.FromEnv())
			if err != nil {
				return nil, err
			}
			return p, nil
		},
		anthropic.Name: func() (provider.Provider, error) {
			p, err := anthropic.New(anthropic.FromEnv())
			if err != nil {
				return nil, err
			}
			return p, nil
		},
	}}
}
