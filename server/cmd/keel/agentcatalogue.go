package main

import (
	"github.com/keelrun/keel/server/gateway"
)

// gatewayAgents is what the HTTP API may tell its callers of the file's
// agents (docs/interop.md): names, descriptions and output schemas;
// never models, instructions or tools. Nil without a file.
func (c *configFlag) gatewayAgents() []gateway.Agent {
	if c == nil || c.cfg == nil {
		return nil
	}
	out := make([]gateway.Agent, 0, len(c.cfg.Agents))
	for _, a := range c.cfg.Agents {
		out = append(out, gateway.Agent{Name: a.Name, Description: a.Description, OutputSchema: a.OutputSchema})
	}
	return out
}

// registerServe is --config for keel serve, which reads only the file's
// agents.
func (c *configFlag) registerServe(fs *flagSet) {
	fs.StringVar(&c.path, "config", "", "the worker's configuration `FILE` (keel.yaml): the HTTP API offers its agents over MCP and A2A (names, descriptions, output schemas); see docs/interop.md")
}
