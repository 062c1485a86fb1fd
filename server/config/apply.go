package config

import (
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/tool"
	"github.com/keelrun/keel/server/tool/mcp"
	"github.com/keelrun/keel/server/worker"
)

// Apply sets in opts what the file configures: the models (AddModels, on
// opts.Models when it is a *worker.Models, else on worker.DefaultModels()),
// Workspace, Tools (the enabled built-ins, unless opts.Tools is already
// set), Policy (approvals and limits), Limits, MCPServers, Agents, and
// Hooks and Sinks (added to a program's own). It builds the providers,
// webhooks and sinks now, so a missing key or secret fails here, naming
// its field.
func (c *Config) Apply(opts *worker.Options) error {
	switch m := opts.Models.(type) {
	case nil:
		models := worker.DefaultModels()
		if err := c.AddModels(models); err != nil {
			return err
		}
		opts.Models = models
	case *worker.Models:
		if err := c.AddModels(m); err != nil {
			return err
		}
	default:
		// A resolver of the program's own decides its models alone.
		if c.declaresModels() {
			return fmt.Errorf("config: %s declares models, scripts or allow_models, which need worker.Options.Models to be a *worker.Models (or nil), not %T", c.File, m)
		}
	}
	if c.Workspace != "" {
		opts.Workspace = c.Workspace
	}
	if opts.Tools == nil {
		root := opts.Workspace
		if root == "" {
			root = "workspace"
		}
		var err error
		if opts.Tools, err = c.NewTools(root); err != nil {
			return err
		}
	}
	opts.Policy = activities.Policy{
		Approvals:   maps.Clone(c.Approvals),
		MaxSteps:    c.Limits.MaxSteps,
		MaxTokens:   c.Limits.MaxTokens,
		Concurrency: maps.Clone(c.Limits.Concurrency),
		RunBudget:   c.RunBudget, SessionBudget: c.SessionBudget,
		RateLimits: maps.Clone(c.Limits.Rate),
	}
	prices, err := c.PriceTable()
	if err != nil {
		return err
	}
	opts.Policy.Prices = prices
	opts.Limits = c.Limits.Inputs
	opts.MCPServers = c.MCPServerConfigs()
	opts.Agents = c.AgentSpecs()
	if err := c.applyHooks(opts); err != nil {
		return err
	}
	opts.Delegation = c.Limits.Delegation
	opts.Schedules = c.Limits.Schedules
	return nil
}

// NewTools returns a registry of the enabled built-in tools (all of them
// when the file lists none), the file tools confined to root, which is
// created if missing.
func (c *Config) NewTools(root string) (*tool.Registry, error) {
	// A worker's workspace is created when missing, as keel worker does.
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, c.errorAt("workspace", "%v", err)
	}
	ws, err := tool.NewWorkspace(root)
	if err != nil {
		return nil, c.errorAt("workspace", "%v", err)
	}
	all := append([]tool.Tool{tool.Sleep(), tool.AskUser()}, ws.Tools()...)
	var enabled []tool.Tool
	for _, t := range all {
		if c.Tools == nil || slices.Contains(c.Tools, t.Spec().Name) {
			enabled = append(enabled, t)
		}
	}
	r, err := tool.NewRegistry(enabled...)
	if err != nil {
		return nil, fmt.Errorf("config: tools: %w", err)
	}
	return r, nil
}

// MCPServerConfigs returns copies of the file's MCP servers, for a
// worker's options.
func (c *Config) MCPServerConfigs() []mcp.ServerConfig {
	var out []mcp.ServerConfig
	for _, s := range c.MCPServers {
		s.Args, s.Env, s.Headers = slices.Clone(s.Args), maps.Clone(s.Env), maps.Clone(s.Headers)
		out = append(out, s)
	}
	return out
}
