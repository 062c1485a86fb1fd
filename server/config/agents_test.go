package config

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/keelrun/keel/internal/delegation"
	"github.com/keelrun/keel/server/tool"
	"github.com/keelrun/keel/server/worker"
)

const agentsYAML = `
models:
  fast:
    provider: scripted
    model: demo
agents:
  researcher:
    description: Finds facts in the workspace.
    model: fast
    instructions: Find the facts and cite the file they came from.
    tools: [read_file, list_files]
    max_steps: 6
    output_schema: {type: object, required: [facts], properties: {facts: {type: array, items: {type: string}}}}
  planner:
    model: scripted:planner
    instructions: Split the task and delegate.
    agents: [researcher]
    detached: false
limits:
  delegation_depth: 2
  delegation_fan_out: 3
`

// docs/contract.md §21.2: keel.yaml's agents, their delegation tools, and
// the limits of delegation reach the worker's options.
func TestAgentsFromFile(t *testing.T) {
	cfg, err := Parse("keel.yaml", []byte(agentsYAML))
	if err != nil {
		t.Fatal(err)
	}
	specs := cfg.AgentSpecs()
	want := delegation.AgentSpec{Name: "researcher", Description: "Finds facts in the workspace.", Model: "fast",
		Instructions: "Find the facts and cite the file they came from.", Tools: []string{"read_file", "list_files"},
		MaxSteps: 6, OutputSchema: json.RawMessage(`{"properties":{"facts":{"items":{"type":"string"},"type":"array"}},"required":["facts"],"type":"object"}`)}
	if diff := cmp.Diff(want, specs["researcher"]); diff != "" {
		t.Errorf("researcher (-want +got):\n%s", diff)
	}
	if got := specs["planner"].Tools; !cmp.Equal(got, []string{"agent__researcher"}) {
		t.Errorf("planner's tools = %v, want its delegation tool", got)
	}
	opts := worker.Options{Workspace: t.TempDir()}
	if err := cfg.Apply(&opts); err != nil {
		t.Fatal(err)
	}
	if len(opts.Agents) != 2 || opts.Delegation != (delegation.DelegationLimits{Depth: 2, FanOut: 3}) {
		t.Errorf("Apply: agents %v, delegation %+v", opts.Agents, opts.Delegation)
	}
	acts, err := worker.NewActivities(nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	dt, ok := acts.Tools.Lookup("agent__researcher")
	if !ok || tool.TraitsOf(dt).Native != tool.NativeAgent {
		t.Fatalf("the worker offers agent__researcher as a delegation tool: %v", ok)
	}
	if _, ok := acts.Tools.Lookup("agent__planner"); ok {
		t.Error("no agent delegates to planner: it has no delegation tool")
	}
}

// A cycle of delegation, an unknown delegate or model, a bad name and a
// schema that does not compile are refused when the file is loaded, each
// at its place.
func TestAgentsRefused(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"self", "agents:\n  a:\n    agents: [a]\n", "bad.yaml:3:13: agents.a.agents: agents delegate in a cycle: a -> a"},
		{"cycle", "agents:\n  a:\n    agents: [b]\n  b:\n    agents: [c]\n  c:\n    agents: [a]\n",
			"bad.yaml:3:13: agents.a.agents: agents delegate in a cycle: a -> b -> c -> a"},
		{"unknown delegate", "agents:\n  a:\n    agents: [ghost]\n", `agents.a.agents: no agent named "ghost"`},
		{"unknown model", "agents:\n  a:\n    model: nope\n", `agents.a.model: no model named "nope"`},
		{"bad name", "agents:\n  9lives: {}\n", "agents.9lives: an agent name is"},
		{"long name", "agents:\n  " + strings.Repeat("a", 33) + ": {}\n", "an agent name is 1 to 32"},
		{"delegation as a tool", "agents:\n  a:\n    tools: [agent__b]\n", `"agent__b": name the agents it may delegate to under agents`},
		{"schema not a mapping", "agents:\n  a:\n    output_schema: [1]\n", "agents.a.output_schema: want a JSON Schema mapping"},
		{"remote ref", "agents:\n  a:\n    output_schema: {$ref: \"https://example.com/s.json\"}\n", "agents.a.output_schema:"},
		{"unknown field", "agents:\n  a:\n    prompt: x\n", "agents.a.prompt: unknown field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("bad.yaml", []byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
	// Agents that only share a delegate form no cycle.
	ok := "agents:\n  a:\n    agents: [c]\n  b:\n    agents: [a, c]\n  c: {}\n"
	if _, err := Parse("ok.yaml", []byte(ok)); err != nil {
		t.Errorf("a diamond is no cycle: %v", err)
	}
}
