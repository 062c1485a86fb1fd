package worker

import (
	"github.com/keelrun/keel/provider"
)

// DefaultModels returns a resolver with the scripted provider and the
// providers configured from the environment.
func DefaultModels() *Models {
	return &Models{Factories: map[string]func() (provider.Provider, error){}}
}
