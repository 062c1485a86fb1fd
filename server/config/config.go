package config

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/tool/mcp"
	"github.com/keelrun/keel/server/worker"
)

// DefaultName is the file keel looks for when told to use a configuration
// without a path; it is only a convention (keel reads no file unless
// --config names it).
const DefaultName = "keel.yaml"

// DefaultModelSpec is the model spec that names the file's default model:
// a run sent with model "default" (keel run --model default) uses it.
const DefaultModelSpec = worker.DefaultModelName

// Providers a model may name.
const (
	ProviderOpenAI    = "openai"
	ProviderAnthropic = "anthropic"
	ProviderScripted  = "scripted"
)

// BuiltinTools are the tools a file may enable (the shell tool needs an
// allow-list and is offered from Go only).
var BuiltinTools = []string{"sleep", "ask_user", "read_file", "write_file", "list_files"}

// Config is a checked keel.yaml. Relative paths in it (workspace, scripts,
// script files) are already resolved against the file's directory.
type Config struct {
	// File is the path the configuration was read from.
	File string
	// Models are the named models, in file order.
	Models []Model
	// DefaultModel names the model of spec "default". Empty: the first of
	// Models, if any.
	DefaultModel string
	// Scripts is the scripts directory: each NAME.json in it is offered as
	// the model spec "scripted:NAME". Empty: none (keel dev has its own).
	Scripts string
	// AllowModels declares what clients may name: model names, specs and
	// patterns ending in '*' (worker.Models.Allow). Nil: the worker offers
	// everything it holds.
	AllowModels []string
	// Workspace is the root of the file tools. Empty: the worker's default.
	Workspace string
	// Tools are the enabled built-in tools. Nil: all of BuiltinTools; empty:
	// none.
	Tools []string
	// Approvals is the worker's policy per tool name or glob pattern
	// (path.Match: "mcp__*", "*"). The stricter of a run's own policy and
	// the worker's applies.
	Approvals map[string]api.Approval
	// Limits bound every run this worker serves.
	Limits Limits
	// MCPServers are the MCP servers whose tools the worker offers, in
	// file order.
	MCPServers []mcp.ServerConfig
	// Prices are the file's prices per model spec or model name, over
	// keel's default table (DefaultPrices) unless NoDefaultPrices
	// (`default_prices: false`): docs/contract.md §20.
	Prices          map[string]keel.Price
	NoDefaultPrices bool
	// RunBudget and SessionBudget are the operator's ceilings (`budgets:
	// {run: ..., session: ...}`). Nil: none.
	RunBudget, SessionBudget *api.Budget
	// Agents are the named agents, in file order (docs/contract.md
	// §21.2).
	Agents []Agent
	// Hooks are the webhooks the worker offers, in file order
	// (docs/contract.md §23).
	Hooks []Hook
	// Sinks are the HTTP sinks that receive every durable event, in file
	// order (docs/contract.md §23.6).
	Sinks []Sink

	// at holds where each field was read, for errors found after parsing
	// (Apply).
	at map[string]position
}

// Model is a named model.
type Model struct {
	// Name is what runs ask for (keel run --model NAME).
	Name string
	// Provider is "openai" (any OpenAI-compatible server), "anthropic" or
	// "scripted".
	Provider string
	// BaseURL is the API root. Optional: the provider's default.
	BaseURL string
	// Model is the provider's model name; for "scripted", "demo" or the
	// path of a script file (the operator's: read when the worker starts,
	// a regular file of at most scripted.MaxScriptBytes).
	Model string
	// APIKeyEnv names the environment variable holding the API key, read
	// by the worker at start. Optional for local servers and scripted.
	APIKeyEnv string
	// MaxTokens caps a response when the run sets no cap. Optional.
	MaxTokens int
	// Reasoning is what a run that sets none asks of the model. Optional.
	Reasoning keel.Reasoning
	// HostedTools names the provider's own tools the model may use
	// (web_search, ...). Optional.
	HostedTools []string
	// API is the OpenAI API the model is served by: "chat" (Chat
	// Completions, what compatible servers speak) or "responses".
	// Optional; default chat. OpenAI only.
	API string
	// VectorStores are the vector stores OpenAI's file_search searches.
	// Optional; required with it.
	VectorStores []string
	// Inputs are the attachment kinds the model reads ("image",
	// "document"), for a server whose models keel cannot tell. Optional;
	// default: the provider's own rule; [] for none.
	Inputs []keel.AttachmentKind
}

// Limits bound every run a worker serves, whatever the run asks for.
type Limits struct {
	// MaxSteps caps the model turns of a run. Optional; 0: the run's own.
	MaxSteps int
	// MaxTokens caps each model response. Optional; 0: the run's own.
	MaxTokens int
	// Concurrency caps the model requests in flight on this worker per
	// provider ("openai", "anthropic", "scripted"). Optional; a missing
	// provider is not limited.
	Concurrency map[string]int
	// Rate paces model requests per provider, "provider:model" or model
	// name: requests and tokens per minute on this worker. Optional.
	Rate map[string]activities.RateLimit
	// Inputs bound what callers send the worker's sessions (prompt_bytes,
	// steering_bytes, answer_bytes, config_bytes, queued_prompts,
	// staged_steers). Optional; zero fields take api.Limits' defaults.
	Inputs api.Limits
	// Delegation bounds how deep child sessions nest and how many one run
	// has running at once (delegation_depth, delegation_fan_out).
	// Optional; zero fields take worker.DelegationLimits' defaults.
	Delegation worker.DelegationLimits
	// Schedules bound the namespace's schedules and their firings
	// (schedules, schedules_per_prefix, schedule_min_interval,
	// schedule_sessions_per_hour). Optional; zero fields take
	// worker.ScheduleLimits' defaults.
	Schedules worker.ScheduleLimits
}

// position is where a field's value sits in the file.
type position struct{ line, column int }

// Load reads and checks the configuration file at path. A problem in the
// file is returned as Errors, each naming the file, line and field.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(path, data)
}

// Parse checks the configuration in data, read from the file named file
// (used in errors and to resolve relative paths; may be a name such as
// "README.md" for text read elsewhere).
func Parse(file string, data []byte) (*Config, error) {
	p := &parser{file: file, dir: filepath.Dir(file), cfg: &Config{File: file, at: map[string]position{}}}
	p.parse(data)
	if len(p.errs) > 0 {
		return nil, p.errs
	}
	return p.cfg, nil
}

// Model returns the named model.
func (c *Config) Model(name string) (Model, bool) {
	for _, m := range c.Models {
		if m.Name == name {
			return m, true
		}
	}
	return Model{}, false
}

// errorAt returns an *Error about field, at the place it was read from.
func (c *Config) errorAt(field, format string, a ...any) *Error {
	pos := c.at[field]
	return &Error{File: c.File, Line: pos.line, Column: pos.column, Field: field, Msg: fmt.Sprintf(format, a...)}
}

// IsModelName reports whether s can name a model of a file: letters,
// digits, '.', '-' and '_', starting with a letter or digit (so never a
// spec such as "openai:MODEL").
func IsModelName(s string) bool { return modelName.MatchString(s) }
