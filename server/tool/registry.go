package tool

import (
	"fmt"
	"sort"
	"sync"

	"github.com/keelrun/keel"
)

// Registry holds the tools a worker can run, by name. It is safe for
// concurrent use: tools may come and go while the worker runs (an MCP
// server's tool list changes).
type Registry struct {
	mu    sync.RWMutex
	tools map[string]Tool
}

// NewRegistry returns a registry holding tools.
func NewRegistry(tools ...Tool) (*Registry, error) {
	r := &Registry{tools: map[string]Tool{}}
	for _, t := range tools {
		if err := r.Register(t); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Register adds t. A second tool with the same name is an error.
func (r *Registry) Register(t Tool) error {
	name := t.Spec().Name
	if name == "" {
		return fmt.Errorf("tool: tool has no name")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.tools[name]; dup {
		return fmt.Errorf("tool: %q registered twice", name)
	}
	r.tools[name] = t
	return nil
}

// Unregister removes the tool called name and reports whether it was
// there. Calls already running go on; later lookups miss it.
func (r *Registry) Unregister(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.tools[name]
	delete(r.tools, name)
	return ok
}

// Lookup returns the tool called name.
func (r *Registry) Lookup(name string) (Tool, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.tools[name]
	return t, ok
}

// Names returns the registered names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.tools))
	for n := range r.tools {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Specs returns the specs of the named tools in the given order. An unknown
// name is an error naming it.
func (r *Registry) Specs(names []string) ([]keel.ToolSpec, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	specs := make([]keel.ToolSpec, 0, len(names))
	for _, n := range names {
		t, ok := r.tools[n]
		if !ok {
			return nil, keel.Errorf(keel.CodeToolUnavailable, "tool %q is not registered on this worker", n)
		}
		specs = append(specs, t.Spec())
	}
	return specs, nil
}
