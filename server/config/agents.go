package config

import (
	"encoding/json"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/delegation"
	"github.com/keelrun/keel/server/tool"
)

// Agent is a named agent of the file (docs/contract.md §21.2): a client
// runs it by name (keel run --agent NAME) and never supplies what it
// holds.
type Agent struct {
	// Name is the agent's name: letters, digits, '-' and '_', starting
	// with a letter, at most api.MaxAgentNameBytes.
	Name string
	// Description says what it does, to the agents that may delegate to
	// it. Optional.
	Description string
	// Model is a model name of the file or a model spec. Optional: the
	// run's.
	Model string
	// Instructions are its system prompt.
	Instructions string
	// Tools are the tools it may call (MCP tools by their mcp__ names).
	Tools []string
	// Agents are the agents it may delegate to: each becomes a tool
	// agent__NAME.
	Agents []string
	// MaxSteps and MaxTokens bound its runs. Optional.
	MaxSteps, MaxTokens int
	// Reasoning is what its runs ask of the model. Optional.
	Reasoning *keel.Reasoning
	// OutputSchema is the JSON Schema its answers must match. Optional.
	OutputSchema json.RawMessage
	// Detached runs a delegation to it in the background. Optional.
	Detached bool
	// Hooks are hooks of the file its runs run, before those a run names
	// itself. Optional.
	Hooks []string
}

// Spec is the agent as the worker offers it.
func (a Agent) Spec() delegation.AgentSpec {
	tools := append([]string{}, a.Tools...)
	for _, d := range a.Agents {
		tools = append(tools, tool.AgentToolPrefix+d)
	}
	return delegation.AgentSpec{Name: a.Name, Description: a.Description, Model: a.Model, Instructions: a.Instructions,
		Tools: tools, Agents: slices.Clone(a.Agents), MaxSteps: a.MaxSteps, MaxTokens: a.MaxTokens, Reasoning: a.Reasoning,
		OutputSchema: a.OutputSchema, Detached: a.Detached, Hooks: slices.Clone(a.Hooks)}
}

// AgentSpecs returns the file's agents by name.
func (c *Config) AgentSpecs() map[string]delegation.AgentSpec {
	if len(c.Agents) == 0 {
		return nil
	}
	out := make(map[string]delegation.AgentSpec, len(c.Agents))
	for _, a := range c.Agents {
		out[a.Name] = a.Spec()
	}
	return out
}

func (p *parser) agents(n *yaml.Node, field string) {
	p.entries(n, field, func(k, v *yaml.Node, f string) {
		a := Agent{Name: k.Value}
		if !api.ValidAgentName(k.Value) {
			p.errorf(k, f, "an agent name is 1 to %d letters, digits, '-' and '_', starting with a letter", api.MaxAgentNameBytes)
		}
		p.mark(k, f)
		p.fields(v, f, map[string]func(*yaml.Node, string){
			"description":  func(n *yaml.Node, f string) { a.Description = p.str(n, f) },
			"model":        func(n *yaml.Node, f string) { a.Model = p.str(n, f) },
			"instructions": func(n *yaml.Node, f string) { a.Instructions = p.str(n, f) },
			"tools": func(n *yaml.Node, f string) {
				a.Tools = p.strings(n, f)
				for i, t := range a.Tools {
					if strings.HasPrefix(t, tool.AgentToolPrefix) {
						p.errorf(n.Content[i], f, "%q: name the agents it may delegate to under agents, not as tools", t)
					}
				}
			},
			"agents":     func(n *yaml.Node, f string) { a.Agents = p.strings(n, f) },
			"hooks":      func(n *yaml.Node, f string) { a.Hooks = p.strings(n, f) },
			"max_steps":  func(n *yaml.Node, f string) { a.MaxSteps = p.positive(n, f) },
			"max_tokens": func(n *yaml.Node, f string) { a.MaxTokens = p.positive(n, f) },
			"reasoning": func(n *yaml.Node, f string) {
				r := p.reasoning(n, f)
				a.Reasoning = &r
			},
			"output_schema": func(n *yaml.Node, f string) { a.OutputSchema = p.schema(n, f) },
			"detached": func(n *yaml.Node, f string) {
				if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" || n.Decode(&a.Detached) != nil {
					p.errorf(n, f, "want true or false, got %s", kind(n))
				}
			},
		})
		p.cfg.Agents = append(p.cfg.Agents, a)
	})
}

// schema reads a JSON Schema written as YAML (or as JSON, which is YAML):
// a mapping, bounded and compiled as a caller's output_schema is.
func (p *parser) schema(n *yaml.Node, field string) json.RawMessage {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind != yaml.MappingNode {
		p.errorf(n, field, "want a JSON Schema mapping, got %s", kind(n))
		return nil
	}
	var v any
	if err := n.Decode(&v); err != nil {
		p.errorf(n, field, "%v", err)
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		p.errorf(n, field, "not expressible as JSON: %v", err)
		return nil
	}
	if err := api.CheckOutputSchema(b); err != nil {
		p.errorf(n, field, "%v", err)
		return nil
	}
	if err := tool.CheckSchema(b); err != nil {
		p.errorf(n, field, "%v", err)
		return nil
	}
	return b
}

// checkAgents checks what the agents name once the file is read: the
// agents they delegate to exist, no agent reaches itself through them (a
// cycle), and their models are the file's or specs.
func (p *parser) checkAgents() {
	byName := map[string]*Agent{}
	for i := range p.cfg.Agents {
		byName[p.cfg.Agents[i].Name] = &p.cfg.Agents[i]
	}
	for _, a := range p.cfg.Agents {
		f := "agents." + a.Name
		for _, d := range a.Agents {
			if _, ok := byName[d]; !ok {
				p.errorAt(f+".agents", "no agent named %q in this file", d)
			}
		}
		if a.Model != "" && !strings.Contains(a.Model, ":") && a.Model != DefaultModelSpec {
			if _, ok := p.cfg.Model(a.Model); !ok {
				p.errorAt(f+".model", "no model named %q in this file (or give a spec such as scripted:NAME)", a.Model)
			}
		}
		p.checkAgentHooks(a)
	}
	// A cycle is refused once, at the first agent (in file order) on it.
	reported := map[string]bool{}
	for _, a := range p.cfg.Agents {
		if cycle := findCycle(a.Name, byName); cycle != nil && !reported[cycle[0]] {
			for _, n := range cycle {
				reported[n] = true
			}
			p.errorAt("agents."+a.Name+".agents", "agents delegate in a cycle: %s", strings.Join(cycle, " -> "))
		}
	}
}

// findCycle returns a delegation path from start back to start, or nil.
func findCycle(start string, byName map[string]*Agent) []string {
	var path []string
	onPath := map[string]bool{}
	done := map[string]bool{}
	var walk func(name string) []string
	walk = func(name string) []string {
		if onPath[name] {
			if name == start {
				return append(slices.Clone(path), name)
			}
			return nil
		}
		a, ok := byName[name]
		if !ok || done[name] {
			return nil
		}
		onPath[name] = true
		path = append(path, name)
		for _, d := range a.Agents {
			if c := walk(d); c != nil {
				return c
			}
		}
		path = path[:len(path)-1]
		onPath[name] = false
		done[name] = true
		return nil
	}
	return walk(start)
}

// errorAt records a problem with a field read earlier, at its place.
func (p *parser) errorAt(field, format string, a ...any) {
	p.errs = append(p.errs, p.cfg.errorAt(field, format, a...))
}
