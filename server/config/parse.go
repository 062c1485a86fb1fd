package config

import (
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/ratelimit"
	"github.com/keelrun/keel/internal/schedreg"
	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/tool/mcp"
	"github.com/keelrun/keel/server/worker"
)

var (
	modelName  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	serverName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)
	envName    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	providers  = []string{ProviderOpenAI, ProviderAnthropic, ProviderScripted}
)

// secretFields are fields people write by habit that would put a key in
// the file; they get their own message rather than "unknown field".
var secretFields = []string{"api_key", "apikey", "key", "token", "password", "secret"}

// parser walks the YAML node tree, so every problem carries the line and
// column of its node and the dotted path of its field, and collects them
// all rather than stopping at the first.
type parser struct {
	file, dir string
	cfg       *Config
	errs      Errors
}

func (p *parser) errorf(n *yaml.Node, field, format string, a ...any) {
	e := &Error{File: p.file, Field: field, Msg: fmt.Sprintf(format, a...)}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
	p.errs = append(p.errs, e)
}

func (p *parser) mark(n *yaml.Node, field string) {
	p.cfg.at[field] = position{n.Line, n.Column}
}

func (p *parser) parse(data []byte) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		// yaml.v3's syntax errors name their line in the message.
		p.errorf(nil, "", "not valid YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
		return
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		p.errorf(nil, "", "the file is empty")
		return
	}
	root := doc.Content[0]
	p.fields(root, "", map[string]func(*yaml.Node, string){
		"models":        p.models,
		"default_model": func(n *yaml.Node, f string) { p.cfg.DefaultModel = p.str(n, f) },
		"scripts":       func(n *yaml.Node, f string) { p.cfg.Scripts = p.localPath(p.str(n, f)) },
		"allow_models":  p.allowModels,
		"workspace":     p.workspace,
		"tools":         p.tools,
		"approvals":     p.approvals,
		"limits":        p.limits,
		"mcp_servers":   p.mcpServers,
		"prices":        p.prices,
		"budgets":       p.budgets,
		"agents":        p.agents,
		"hooks":         p.hooks,
		"sinks":         p.sinks,
		"default_prices": func(n *yaml.Node, f string) {
			var on bool
			if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" || n.Decode(&on) != nil {
				p.errorf(n, f, "want true or false, got %s", kind(n))
			}
			p.cfg.NoDefaultPrices = !on
		},
	})
	p.checkDefault()
	p.checkAgents()
}

// fields checks that n is a mapping whose keys are all known, and calls
// each key's parser with the value and its dotted path.
func (p *parser) fields(n *yaml.Node, prefix string, known map[string]func(*yaml.Node, string)) {
	p.entries(n, prefix, func(k, v *yaml.Node, field string) {
		parse, ok := known[k.Value]
		switch {
		case ok:
			p.mark(v, field)
			parse(v, field)
		case slices.Contains(secretFields, k.Value):
			// Never echo the value: it may be the key itself.
			p.errorf(k, field, "keys and secrets never go in the configuration file; name the environment variable that holds the key with api_key_env (secret_env for hooks and sinks)")
		default:
			p.errorf(k, field, "unknown field (known: %s)", strings.Join(sortedKeys(known), ", "))
		}
	})
}

// entries calls f for each key and value of the mapping n, refusing
// anything else and repeated keys.
func (p *parser) entries(n *yaml.Node, prefix string, f func(k, v *yaml.Node, field string)) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind != yaml.MappingNode {
		p.errorf(n, prefix, "want a mapping of fields, got %s", kind(n))
		return
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		field := k.Value
		if prefix != "" {
			field = prefix + "." + k.Value
		}
		if k.Kind != yaml.ScalarNode || k.Value == "<<" {
			p.errorf(k, prefix, "want a plain key, got %s", kind(k))
			continue
		}
		if seen[k.Value] {
			p.errorf(k, field, "given twice")
			continue
		}
		seen[k.Value] = true
		f(k, v, field)
	}
}

func (p *parser) str(n *yaml.Node, field string) string {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		p.errorf(n, field, "want a string, got %s", kind(n))
		return ""
	}
	if n.Value == "" {
		p.errorf(n, field, "is empty")
	}
	return n.Value
}

func (p *parser) positive(n *yaml.Node, field string) int {
	var v int
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || n.Decode(&v) != nil {
		p.errorf(n, field, "want a whole number, got %s", kind(n))
		return 0
	}
	if v < 1 {
		p.errorf(n, field, "must be at least 1, got %d", v)
		return 0
	}
	return v
}

// atMost is positive, and at most limit.
func (p *parser) atMost(n *yaml.Node, field string, limit int) int {
	v := p.positive(n, field)
	if v > limit {
		p.errorf(n, field, "must be at most %d, got %d", limit, v)
		return 0
	}
	return v
}

func (p *parser) strings(n *yaml.Node, field string) []string {
	if n.Kind != yaml.SequenceNode {
		p.errorf(n, field, "want a list, got %s", kind(n))
		return nil
	}
	out := make([]string, 0, len(n.Content))
	for i, item := range n.Content {
		out = append(out, p.str(item, fmt.Sprintf("%s[%d]", field, i)))
	}
	return out
}

// envMap reads a mapping of environment variable names to values.
func (p *parser) envMap(n *yaml.Node, field string) map[string]string {
	out := map[string]string{}
	p.entries(n, field, func(k, v *yaml.Node, f string) {
		if !envName.MatchString(k.Value) {
			p.errorf(k, f, "not an environment variable name")
		}
		if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
			p.errorf(v, f, "want a string, got %s", kind(v))
			return
		}
		out[k.Value] = v.Value
	})
	return out
}

func (p *parser) httpURL(n *yaml.Node, field string) string {
	s := p.str(n, field)
	if s == "" {
		return ""
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		p.errorf(n, field, "want an absolute http or https URL")
		return ""
	}
	if u.User != nil {
		// Credentials in a URL would land in logs; keys go in variables.
		p.errorf(n, field, "must not hold credentials (user:password@)")
		return ""
	}
	return s
}

// localPath resolves a path against the configuration file's directory.
func (p *parser) localPath(s string) string {
	if s == "" || filepath.IsAbs(s) {
		return s
	}
	return filepath.Join(p.dir, s)
}

func (p *parser) models(n *yaml.Node, field string) {
	p.entries(n, field, func(k, v *yaml.Node, f string) {
		m := Model{Name: k.Value}
		switch {
		case !modelName.MatchString(k.Value):
			p.errorf(k, f, "a model name is letters, digits, '.', '-' and '_' (no ':', which starts a spec such as openai:MODEL)")
		case k.Value == DefaultModelSpec:
			p.errorf(k, f, "%q is reserved: it names default_model", DefaultModelSpec)
		}
		p.mark(k, f)
		p.fields(v, f, map[string]func(*yaml.Node, string){
			"provider": func(n *yaml.Node, f string) {
				m.Provider = p.str(n, f)
				if m.Provider != "" && !slices.Contains(providers, m.Provider) {
					p.errorf(n, f, "unknown provider %q (known: %s)", m.Provider, strings.Join(providers, ", "))
				}
			},
			"base_url": func(n *yaml.Node, f string) { m.BaseURL = p.httpURL(n, f) },
			"model":    func(n *yaml.Node, f string) { m.Model = p.str(n, f) },
			"api_key_env": func(n *yaml.Node, f string) {
				if n.Kind != yaml.ScalarNode || !envName.MatchString(n.Value) {
					// The value is not echoed: a pasted key lands here.
					p.errorf(n, f, "want the name of an environment variable (such as OPENAI_API_KEY), not the key")
					return
				}
				m.APIKeyEnv = n.Value
			},
			"max_tokens":    func(n *yaml.Node, f string) { m.MaxTokens = p.positive(n, f) },
			"reasoning":     func(n *yaml.Node, f string) { m.Reasoning = p.reasoning(n, f) },
			"hosted_tools":  func(n *yaml.Node, f string) { m.HostedTools = p.strings(n, f) },
			"api":           func(n *yaml.Node, f string) { m.API = p.str(n, f) },
			"vector_stores": func(n *yaml.Node, f string) { m.VectorStores = p.strings(n, f) },
			"inputs": func(n *yaml.Node, f string) {
				m.Inputs = []keel.AttachmentKind{}
				for _, k := range p.strings(n, f) {
					switch kind := keel.AttachmentKind(k); kind {
					case keel.AttachmentImage, keel.AttachmentDocument:
						m.Inputs = append(m.Inputs, kind)
					default:
						p.errorf(n, f, "%q: an input is image or document", k)
					}
				}
			},
		})
		if v.Kind == yaml.MappingNode {
			p.checkModel(k, f, &m)
		}
		p.cfg.Models = append(p.cfg.Models, m)
	})
}

func (p *parser) checkModel(k *yaml.Node, f string, m *Model) {
	if m.Provider == "" {
		p.errorf(k, f+".provider", "required: %s", strings.Join(providers, ", "))
	}
	if m.Model == "" {
		p.errorf(k, f+".model", "required: the provider's model name")
	}
	if m.Provider != ProviderOpenAI && (m.API != "" || m.VectorStores != nil) {
		p.errorf(k, f, "api and vector_stores are for openai models")
	}
	if m.Provider == ProviderScripted {
		if m.BaseURL != "" || m.APIKeyEnv != "" || m.MaxTokens != 0 || m.HostedTools != nil || m.Inputs != nil {
			p.errorf(k, f, "a scripted model takes no base_url, api_key_env, max_tokens, hosted_tools or inputs")
		}
		if m.Model != "demo" {
			m.Model = p.localPath(m.Model)
		}
	}
}

// reasoning reads a reasoning setting: effort, budget_tokens or both.
func (p *parser) reasoning(n *yaml.Node, field string) keel.Reasoning {
	var r keel.Reasoning
	p.fields(n, field, map[string]func(*yaml.Node, string){
		"effort":        func(n *yaml.Node, f string) { r.Effort = keel.ReasoningEffort(p.str(n, f)) },
		"budget_tokens": func(n *yaml.Node, f string) { r.BudgetTokens = p.positive(n, f) },
	})
	if err := r.Validate(); err != nil {
		p.errorf(n, field, "%s", strings.TrimPrefix(err.(*keel.Error).Message, "reasoning."))
	}
	return r
}

func (p *parser) checkDefault() {
	name := p.cfg.DefaultModel
	if name == "" {
		return
	}
	if _, ok := p.cfg.Model(name); !ok {
		pos := p.cfg.at["default_model"]
		p.errs = append(p.errs, &Error{File: p.file, Line: pos.line, Column: pos.column, Field: "default_model",
			Msg: fmt.Sprintf("names no model under models: %q", name)})
	}
}

// allowModels reads allow_models: a non-empty list of model names, specs
// and patterns (worker.CheckAllow).
func (p *parser) allowModels(n *yaml.Node, field string) {
	entries := p.strings(n, field)
	if entries == nil {
		return
	}
	if len(entries) == 0 {
		p.errorf(n, field, "is empty; leave it out to offer every model the worker holds")
		return
	}
	p.cfg.AllowModels = []string{}
	for i, a := range entries {
		switch err := worker.CheckAllow([]string{a}); {
		case a == "":
		case err != nil:
			p.errorf(n.Content[i], fmt.Sprintf("%s[%d]", field, i), "%s", strings.TrimPrefix(err.Error(), "allowed model "))
		case slices.Contains(p.cfg.AllowModels, a):
			p.errorf(n.Content[i], fmt.Sprintf("%s[%d]", field, i), "%q is listed twice", a)
		default:
			p.cfg.AllowModels = append(p.cfg.AllowModels, a)
		}
	}
}

func (p *parser) workspace(n *yaml.Node, field string) {
	p.cfg.Workspace = p.localPath(p.str(n, field))
}

func (p *parser) tools(n *yaml.Node, field string) {
	names := p.strings(n, field)
	if names == nil {
		return
	}
	p.cfg.Tools = []string{}
	for i, name := range names {
		f := fmt.Sprintf("%s[%d]", field, i)
		switch {
		case name == "":
		case !slices.Contains(BuiltinTools, name):
			p.errorf(n.Content[i], f, "unknown built-in tool %q (known: %s)", name, strings.Join(BuiltinTools, ", "))
		case slices.Contains(p.cfg.Tools, name):
			p.errorf(n.Content[i], f, "%q is listed twice", name)
		default:
			p.cfg.Tools = append(p.cfg.Tools, name)
		}
	}
}

func (p *parser) approvals(n *yaml.Node, field string) {
	p.cfg.Approvals = map[string]api.Approval{}
	p.entries(n, field, func(k, v *yaml.Node, f string) {
		if _, err := path.Match(k.Value, ""); err != nil || k.Value == "" {
			p.errorf(k, f, "not a tool name or pattern")
			return
		}
		a := api.Approval(p.str(v, f))
		switch a {
		case api.ApprovalAllow, api.ApprovalAsk, api.ApprovalDeny:
			p.cfg.Approvals[k.Value] = a
		case "":
		default:
			p.errorf(v, f, "unknown policy %q: use allow, ask or deny", a)
		}
	})
}

func (p *parser) limits(n *yaml.Node, field string) {
	l := &p.cfg.Limits
	p.fields(n, field, map[string]func(*yaml.Node, string){
		"max_steps":            func(n *yaml.Node, f string) { l.MaxSteps = p.positive(n, f) },
		"max_tokens":           func(n *yaml.Node, f string) { l.MaxTokens = p.positive(n, f) },
		"prompt_bytes":         func(n *yaml.Node, f string) { l.Inputs.PromptBytes = p.positive(n, f) },
		"steering_bytes":       func(n *yaml.Node, f string) { l.Inputs.SteeringBytes = p.positive(n, f) },
		"answer_bytes":         func(n *yaml.Node, f string) { l.Inputs.AnswerBytes = p.positive(n, f) },
		"config_bytes":         func(n *yaml.Node, f string) { l.Inputs.ConfigBytes = p.positive(n, f) },
		"queued_prompts":       func(n *yaml.Node, f string) { l.Inputs.QueuedPrompts = p.positive(n, f) },
		"staged_steers":        func(n *yaml.Node, f string) { l.Inputs.StagedSteers = p.positive(n, f) },
		"delegation_depth":     func(n *yaml.Node, f string) { l.Delegation.Depth = p.positive(n, f) },
		"delegation_fan_out":   func(n *yaml.Node, f string) { l.Delegation.FanOut = p.positive(n, f) },
		"schedules":            func(n *yaml.Node, f string) { l.Schedules.Schedules = p.atMost(n, f, schedreg.MaxSchedulesCeiling) },
		"schedules_per_prefix": func(n *yaml.Node, f string) { l.Schedules.PerPrefix = p.positive(n, f) },
		"schedule_min_interval": func(n *yaml.Node, f string) {
			d, err := time.ParseDuration(p.str(n, f))
			if err != nil || d < api.MinScheduleEvery.Std() || d > schedreg.MaxScheduleMinInterval.Std() {
				p.errorf(n, f, "want a duration from %s to %s, such as 5m", api.MinScheduleEvery, schedreg.MaxScheduleMinInterval)
				return
			}
			l.Schedules.MinInterval = keel.Duration(d)
		},
		"schedule_sessions_per_hour": func(n *yaml.Node, f string) {
			l.Schedules.SessionsPerHour = p.atMost(n, f, schedreg.MaxScheduleSessionsPerHour)
		},
		"rate": func(n *yaml.Node, f string) {
			l.Rate = map[string]activities.RateLimit{}
			p.entries(n, f, func(k, v *yaml.Node, f string) {
				if err := ratelimit.ValidateRateKey(k.Value); err != nil {
					p.errorf(k, f, "a limit's name is 1 to %d bytes with no control characters", ratelimit.MaxRateKeyBytes)
					return
				}
				var rl activities.RateLimit
				p.fields(v, f, map[string]func(*yaml.Node, string){
					"requests_per_minute": func(n *yaml.Node, f string) { rl.RequestsPerMinute = p.atMost(n, f, ratelimit.MaxRequestsPerMinute) },
					"tokens_per_minute":   func(n *yaml.Node, f string) { rl.TokensPerMinute = p.atMost(n, f, ratelimit.MaxTokensPerMinute) },
				})
				if !rl.Limits() {
					p.errorf(v, f, "sets neither requests_per_minute nor tokens_per_minute")
				}
				l.Rate[k.Value] = rl
			})
		},
		"concurrency": func(n *yaml.Node, f string) {
			l.Concurrency = map[string]int{}
			p.entries(n, f, func(k, v *yaml.Node, f string) {
				if !slices.Contains(providers, k.Value) {
					p.errorf(k, f, "unknown provider %q (known: %s)", k.Value, strings.Join(providers, ", "))
					return
				}
				l.Concurrency[k.Value] = p.positive(v, f)
			})
		},
	})
}

func (p *parser) mcpServers(n *yaml.Node, field string) {
	p.entries(n, field, func(k, v *yaml.Node, f string) {
		s := mcp.ServerConfig{Name: k.Value}
		if !serverName.MatchString(k.Value) {
			p.errorf(k, f, "a server name is letters, digits, '-' and '_'")
		}
		for _, other := range p.cfg.MCPServers {
			if strings.EqualFold(other.Name, s.Name) {
				p.errorf(k, f, "a second server named %q", other.Name)
			}
		}
		p.mark(k, f)
		p.fields(v, f, map[string]func(*yaml.Node, string){
			"command": func(n *yaml.Node, f string) { s.Command = p.str(n, f) },
			"args":    func(n *yaml.Node, f string) { s.Args = p.strings(n, f) },
			"env":     func(n *yaml.Node, f string) { s.Env = p.envMap(n, f) },
			"url":     func(n *yaml.Node, f string) { s.URL = p.httpURL(n, f) },
			"headers": func(n *yaml.Node, f string) {
				s.Headers = map[string]string{}
				p.entries(n, f, func(k, v *yaml.Node, f string) {
					if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
						p.errorf(v, f, "want a string, got %s", kind(v))
						return
					}
					s.Headers[k.Value] = v.Value
				})
			},
			"max_response_bytes": func(n *yaml.Node, f string) { s.MaxResponseBytes = p.positive(n, f) },
			"timeout": func(n *yaml.Node, f string) {
				d, err := time.ParseDuration(p.str(n, f))
				if err != nil || d <= 0 {
					p.errorf(n, f, "want a positive duration such as 30s or 5m")
					return
				}
				s.Timeout = d
			},
			"sampling": func(n *yaml.Node, f string) {
				switch v := p.str(n, f); v {
				case "allow":
					s.Sampling = true
				case "refuse", "":
				default:
					p.errorf(n, f, "unknown policy %q: use refuse or allow", v)
				}
			},
		})
		if v.Kind == yaml.MappingNode {
			switch {
			case s.Command == "" && s.URL == "":
				p.errorf(k, f, "set command (a stdio server) or url (a streamable-HTTP server)")
			case s.Command != "" && s.URL != "":
				p.errorf(k, f, "set command or url, not both")
			case s.Command != "" && s.Headers != nil:
				p.errorf(k, f+".headers", "headers go with url, not command")
			case s.URL != "" && (s.Args != nil || s.Env != nil):
				p.errorf(k, f, "args and env go with command, not url")
			}
		}
		p.cfg.MCPServers = append(p.cfg.MCPServers, s)
	})
}

func kind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return "nothing"
		case "!!str":
			return "a string"
		case "!!int", "!!float":
			return "a number"
		case "!!bool":
			return "true/false"
		}
		return "a scalar"
	}
	return "nothing"
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
