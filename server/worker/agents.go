package worker

import (
	"fmt"
	"sort"

	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/delegation"
	"github.com/keelrun/keel/server/tool"
)

// addAgentTools adds to tools the delegation tool (agent__NAME) of every
// agent that another agent may delegate to (docs/contract.md §21.3).
func addAgentTools(tools *tool.Registry, agents map[string]delegation.AgentSpec) error {
	targets := map[string]bool{}
	for name, a := range agents {
		if !api.ValidAgentName(name) || a.Name != name {
			return fmt.Errorf("worker: agent %q: a name is letters, digits, '-' and '_', starting with a letter, and the spec's own", name)
		}
		for _, d := range a.Agents {
			if _, ok := agents[d]; !ok {
				return fmt.Errorf("worker: agent %s delegates to %q, which is no agent of the worker", name, d)
			}
			targets[d] = true
		}
	}
	names := make([]string, 0, len(targets))
	for n := range targets {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if _, ok := tools.Lookup(tool.AgentToolPrefix + n); ok {
			continue
		}
		a := agents[n]
		if err := tools.Register(tool.AgentTool(n, a.Description, a.Detached)); err != nil {
			return fmt.Errorf("worker: agent %s: %w", n, err)
		}
	}
	return nil
}
