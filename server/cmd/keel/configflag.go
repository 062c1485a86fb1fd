package main

import (
	"flag"

	"github.com/keelrun/keel/server/config"
	"github.com/keelrun/keel/server/worker"
)

// configFlag is --config, the keel.yaml of keel worker and keel dev
// (docs/config.md).
type configFlag struct {
	path string
	cfg  *config.Config
}

func (c *configFlag) register(fs *flagSet) {
	fs.StringVar(&c.path, "config", "", "worker configuration `FILE` (keel.yaml): named models, tools, approvals, limits, MCP servers; see docs/config.md")
}

// load reads and checks the file, if one was named; its errors name the
// file, line and field.
func (c *configFlag) load() error {
	if c.path == "" {
		return nil
	}
	cfg, err := config.Load(c.path)
	if err != nil {
		return err
	}
	c.cfg = cfg
	return nil
}

// workspace returns the file tools' root: an explicit --workspace wins,
// then the file's workspace, then the flag's default.
func (c *configFlag) workspace(fs *flagSet, flagValue string) string {
	explicit := false
	fs.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "workspace" })
	if c.cfg == nil || c.cfg.Workspace == "" || explicit {
		return flagValue
	}
	return c.cfg.Workspace
}

// apply sets in opts what the file configures, with the file tools on
// opts.Workspace (which workspace chose).
func (c *configFlag) apply(opts *worker.Options) error {
	if c.cfg == nil {
		// Without a file, keel's default price table still prices the
		// models it names (docs/contract.md §20).
		prices, err := config.DefaultPrices()
		if err != nil {
			return err
		}
		opts.Policy.Prices = prices
		return nil
	}
	cfg := *c.cfg
	cfg.Workspace = opts.Workspace
	return cfg.Apply(opts)
}

// note is the banner line about the file.
func (c *configFlag) note() string {
	if c.cfg == nil {
		return "none (--config keel.yaml)"
	}
	return c.path
}
