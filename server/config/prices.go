package config

import (
	_ "embed"
	"fmt"
	"maps"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
)

// Prices from the file are named this in every cost they price.
const PricesFromFile = "keel.yaml"

//go:embed prices.yaml
var defaultPricesYAML []byte

// DefaultPrices is keel's own table of list prices for common models,
// named by its date (DefaultPricesName) in every cost it prices: an
// estimate to be checked against the provider's bill, never the bill.
// keel.yaml's prices replace its entries model by model, and
// `default_prices: false` turns it off.
func DefaultPrices() (map[string]keel.Price, error) {
	var doc struct {
		Name   string `yaml:"name"`
		Prices map[string]struct {
			Currency    string  `yaml:"currency"`
			Input       float64 `yaml:"input"`
			Output      float64 `yaml:"output"`
			CachedInput float64 `yaml:"cached_input"`
			CacheWrite  float64 `yaml:"cache_write"`
			WebSearch   float64 `yaml:"web_search"`
		} `yaml:"prices"`
	}
	if err := yaml.Unmarshal(defaultPricesYAML, &doc); err != nil {
		return nil, fmt.Errorf("config: keel's default price table: %w", err)
	}
	out := make(map[string]keel.Price, len(doc.Prices))
	for spec, e := range doc.Prices {
		p := keel.Price{Currency: e.Currency, Input: e.Input, Output: e.Output, CachedInput: e.CachedInput,
			CacheWrite: e.CacheWrite, WebSearch: e.WebSearch, Prices: doc.Name}
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("config: keel's default price table: %s: %w", spec, err)
		}
		out[spec] = p
	}
	return out, nil
}

// DefaultPricesName names keel's default price table.
func DefaultPricesName() string {
	var doc struct {
		Name string `yaml:"name"`
	}
	_ = yaml.Unmarshal(defaultPricesYAML, &doc)
	return doc.Name
}

// PriceTable returns the prices a worker of this file uses: keel's
// default table unless the file turns it off, with the file's own
// entries over it.
func (c *Config) PriceTable() (map[string]keel.Price, error) {
	out := map[string]keel.Price{}
	if !c.NoDefaultPrices {
		d, err := DefaultPrices()
		if err != nil {
			return nil, err
		}
		out = d
	}
	maps.Copy(out, c.Prices)
	return out, nil
}

// prices parses `prices:`, a mapping of model spec (or keel.yaml model
// name) to price: per million tokens, and web_search per thousand hosted
// web searches.
func (p *parser) prices(n *yaml.Node, field string) {
	p.cfg.Prices = map[string]keel.Price{}
	p.entries(n, field, func(k, v *yaml.Node, f string) {
		if k.Value == "" || strings.ContainsAny(k.Value, " \t\r\n") {
			p.errorf(k, f, "want a model spec such as anthropic:claude-sonnet-4-5 or a model's name")
			return
		}
		pr := keel.Price{Prices: PricesFromFile}
		seen := map[string]bool{}
		p.fields(v, f, map[string]func(*yaml.Node, string){
			"input":        func(n *yaml.Node, f string) { pr.Input = p.amount(n, f); seen["input"] = true },
			"output":       func(n *yaml.Node, f string) { pr.Output = p.amount(n, f); seen["output"] = true },
			"cached_input": func(n *yaml.Node, f string) { pr.CachedInput = p.amount(n, f) },
			"cache_write":  func(n *yaml.Node, f string) { pr.CacheWrite = p.amount(n, f) },
			"web_search":   func(n *yaml.Node, f string) { pr.WebSearch = p.amount(n, f) },
			"currency":     func(n *yaml.Node, f string) { pr.Currency = p.str(n, f) },
		})
		for _, need := range []string{"input", "output"} {
			if !seen[need] {
				p.errorf(v, f, "needs %s (the price per million tokens)", need)
			}
		}
		if err := pr.Validate(); err != nil && pr.Currency != "" {
			p.errorf(v, f, "%v", err)
		} else if pr.Currency == "" {
			p.errorf(v, f, "needs currency (a three-letter code such as USD)")
		}
		p.cfg.Prices[k.Value] = pr
	})
}

// budgets parses `budgets:`, the operator's ceilings per run and per
// session.
func (p *parser) budgets(n *yaml.Node, field string) {
	p.fields(n, field, map[string]func(*yaml.Node, string){
		"run":     func(n *yaml.Node, f string) { p.cfg.RunBudget = p.budget(n, f) },
		"session": func(n *yaml.Node, f string) { p.cfg.SessionBudget = p.budget(n, f) },
	})
}

func (p *parser) budget(n *yaml.Node, field string) *api.Budget {
	b := &api.Budget{}
	p.fields(n, field, map[string]func(*yaml.Node, string){
		"max":        func(n *yaml.Node, f string) { b.Max = p.amount(n, f) },
		"currency":   func(n *yaml.Node, f string) { b.Currency = p.str(n, f) },
		"max_tokens": func(n *yaml.Node, f string) { b.MaxTokens = int64(p.positive(n, f)) },
		"warn_at":    func(n *yaml.Node, f string) { b.WarnAt = p.amount(n, f) },
	})
	if err := b.Validate(field); err != nil {
		p.errorf(n, field, "%s", strings.TrimPrefix(strings.TrimPrefix(err.Error(), "keel: "), field+"."))
	}
	if b.IsZero() {
		p.errorf(n, field, "sets no limit: give max (with currency) or max_tokens")
	}
	return b
}

// amount reads a number (3, 0.30).
func (p *parser) amount(n *yaml.Node, field string) float64 {
	var v float64
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") || n.Decode(&v) != nil {
		p.errorf(n, field, "want a number, got %s", kind(n))
		return 0
	}
	return v
}
