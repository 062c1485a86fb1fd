package tool

import (
	"fmt"
	"sort"

	"github.com/keelrun/keel"
)

// Registry holds the tools a worker can run, by name.
type Registry struct {
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
	if _, dup := r.tools[name]; dup {
		return fmt.Errorf("tool: %q registered twice", name)
	}
	r.tools[name] = t
	return nil
}

// Lookup returns the tool called name.
func (r *Registry) Lookup(name string) (Tool, bool) {
	t, ok := r.tools[name]
	return t, ok
}

// Names returns the registered names, sorted.
func (r *Registry) Names() []string {
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
