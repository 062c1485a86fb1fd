package config

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/server/tool/mcp"
)

func TestLoadComplete(t *testing.T) {
	cfg, err := Load("testdata/keel.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		File: "testdata/keel.yaml",
		Models: []Model{
			{Name: "gpt", Provider: "openai", Model: "gpt-4.1-mini", APIKeyEnv: "OPENAI_API_KEY"},
			{Name: "local", Provider: "openai", BaseURL: "http://localhost:11434/v1", Model: "qwen3:8b"},
			{Name: "claude", Provider: "anthropic", Model: "claude-sonnet-4-5", APIKeyEnv: "ANTHROPIC_API_KEY", MaxTokens: 8192},
			{Name: "demo", Provider: "scripted", Model: "demo"},
			{Name: "replay", Provider: "scripted", Model: filepath.Join("testdata", "scripts", "turns.json")},
		},
		DefaultModel: "local",
		Scripts:      filepath.Join("testdata", "scripts"),
		AllowModels:  []string{"gpt", "local", "default", "scripted:*", "openai:gpt-4*"},
		Workspace:    filepath.Join("testdata", "workspace"),
		Tools:        []string{"read_file", "list_files", "ask_user"},
		Approvals:    map[string]api.Approval{"write_file": "deny", "mcp__*": "ask", "*": "allow"},
		Limits: Limits{MaxSteps: 12, MaxTokens: 2048, Concurrency: map[string]int{"openai": 4, "anthropic": 2},
			Inputs: api.Limits{PromptBytes: 64 << 10, QueuedPrompts: 8, StagedSteers: 4}},
		MCPServers: []mcp.ServerConfig{
			{Name: "everything", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-everything"},
				Env: map[string]string{"LOG_LEVEL": "debug"}, Timeout: 2 * time.Minute, Sampling: true},
			{Name: "docs", URL: "https://mcp.example.com/mcp",
				Headers: map[string]string{"Authorization": "Bearer ${DOCS_MCP_TOKEN}"}, MaxResponseBytes: 1 << 20},
		},
	}
	if diff := cmp.Diff(want, cfg, cmpopts.IgnoreUnexported(Config{})); diff != "" {
		t.Errorf("Load (-want +got):\n%s", diff)
	}
	// Only the server the file allows may sample (the worker's
	// mcp.ServerConfig.Sampling).
	var sampling []bool
	for _, s := range cfg.MCPServerConfigs() {
		sampling = append(sampling, s.Sampling)
	}
	if diff := cmp.Diff([]bool{true, false}, sampling); diff != "" {
		t.Errorf("MCPServerConfigs Sampling (-want +got):\n%s", diff)
	}
	if got := cfg.MCPServerConfigs()[1].MaxResponseBytes; got != 1<<20 {
		t.Errorf("MCPServerConfigs MaxResponseBytes = %d, want %d", got, 1<<20)
	}
	refused, err := Parse("keel.yaml", []byte("mcp_servers:\n  fs:\n    command: npx\n    sampling: refuse\n"))
	if err != nil || len(refused.MCPServers) != 1 || refused.MCPServers[0].Sampling {
		t.Errorf("sampling: refuse: %+v, %v; want a server that may not sample", refused, err)
	}
}

func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		// want is the start of the first error: file:line:column: field:
		want string
		// secret must not appear in the error.
		secret string
	}{
		{name: "unknown top-level field", yaml: "workspace: ws\nmodle: x\n",
			want: "bad.yaml:2:1: modle: unknown field (known: agents, allow_models, approvals, budgets, default_model, default_prices, hooks, limits, mcp_servers, models, prices, scripts, sinks, tools, workspace)"},
		{name: "literal key", yaml: "models:\n  gpt:\n    provider: openai\n    model: m\n    api_key: sk-live-0123456789\n",
			want: "bad.yaml:5:5: models.gpt.api_key: keys and secrets never go", secret: "sk-live-0123456789"},
		{name: "key pasted as variable name", yaml: "models:\n  gpt:\n    provider: openai\n    model: m\n    api_key_env: sk-live-0123456789\n",
			want: "bad.yaml:5:18: models.gpt.api_key_env: want the name of an environment variable", secret: "sk-live-0123456789"},
		{name: "unknown model field", yaml: "models:\n  gpt:\n    provider: openai\n    model: m\n    temperature: 0.2\n",
			want: "bad.yaml:5:5: models.gpt.temperature: unknown field (known: api, api_key_env, base_url, hosted_tools, inputs, max_tokens, model, provider, reasoning, vector_stores)"},
		{name: "unknown provider", yaml: "models:\n  g:\n    provider: gemini\n    model: m\n",
			want: `bad.yaml:3:15: models.g.provider: unknown provider "gemini"`},
		{name: "missing model", yaml: "models:\n  g:\n    provider: openai\n",
			want: "bad.yaml:2:3: models.g.model: required"},
		{name: "spec as a name", yaml: "models:\n  openai:gpt:\n    provider: openai\n    model: m\n",
			want: "bad.yaml:2:3: models.openai:gpt: a model name is"},
		{name: "reserved name", yaml: "models:\n  default:\n    provider: openai\n    model: m\n",
			want: `bad.yaml:2:3: models.default: "default" is reserved`},
		{name: "credentials in URL", yaml: "models:\n  g:\n    provider: openai\n    model: m\n    base_url: https://me:hunter2@api.example.com/v1\n",
			want: "bad.yaml:5:15: models.g.base_url: must not hold credentials", secret: "hunter2"},
		{name: "not a URL", yaml: "models:\n  g:\n    provider: openai\n    model: m\n    base_url: localhost:8080\n",
			want: "bad.yaml:5:15: models.g.base_url: want an absolute http or https URL"},
		{name: "negative max_tokens", yaml: "models:\n  g:\n    provider: openai\n    model: m\n    max_tokens: -3\n",
			want: "bad.yaml:5:17: models.g.max_tokens: must be at least 1, got -3"},
		{name: "scripted with a key", yaml: "models:\n  s:\n    provider: scripted\n    model: demo\n    api_key_env: K\n",
			want: "bad.yaml:2:3: models.s: a scripted model takes no base_url, api_key_env, max_tokens, hosted_tools or inputs"},
		{name: "unknown reasoning effort", yaml: "models:\n  c:\n    provider: anthropic\n    model: m\n    reasoning: {effort: max}\n",
			want: `bad.yaml:5:16: models.c.reasoning: effort "max": use minimal, low, medium or high`},
		{name: "reasoning budget too small", yaml: "models:\n  c:\n    provider: anthropic\n    model: m\n    reasoning: {budget_tokens: 100}\n",
			want: "bad.yaml:5:16: models.c.reasoning: budget_tokens 100: want 1024 to 128000"},
		{name: "default names nothing", yaml: "models:\n  g:\n    provider: openai\n    model: m\ndefault_model: gpt\n",
			want: `bad.yaml:5:16: default_model: names no model under models: "gpt"`},
		{name: "price without currency", yaml: "prices:\n  \"openai:gpt-x\": {input: 1, output: 2}\n",
			want: "bad.yaml:2:19: prices.openai:gpt-x: needs currency"},
		{name: "price without output", yaml: "prices:\n  m: {input: 1, currency: USD}\n",
			want: "bad.yaml:2:6: prices.m: needs output"},
		{name: "negative price", yaml: "prices:\n  m: {input: -1, output: 2, currency: USD}\n",
			want: "bad.yaml:2:6: prices.m: input must be a price per million tokens"},
		{name: "price as text", yaml: "prices:\n  m: {input: cheap, output: 2, currency: USD}\n",
			want: "bad.yaml:2:14: prices.m.input: want a number, got a string"},
		{name: "negative search price", yaml: "prices:\n  m: {input: 1, output: 2, web_search: -10, currency: USD}\n",
			want: "bad.yaml:2:6: prices.m: web_search must be a price per thousand searches"},
		{name: "search price as text", yaml: "prices:\n  m: {input: 1, output: 2, web_search: ten, currency: USD}\n",
			want: "bad.yaml:2:40: prices.m.web_search: want a number, got a string"},
		{name: "lowercase currency", yaml: "prices:\n  m: {input: 1, output: 2, currency: usd}\n",
			want: "bad.yaml:2:6: prices.m: currency must be a three-letter code"},
		{name: "budget without limit", yaml: "budgets:\n  run: {currency: USD}\n",
			want: "bad.yaml:2:8: budgets.run: "},
		{name: "budget without currency", yaml: "budgets:\n  session: {max: 5}\n",
			want: "bad.yaml:2:12: budgets.session: currency: currency must be"},
		{name: "unknown budget scope", yaml: "budgets:\n  day: {max: 5, currency: USD}\n",
			want: "bad.yaml:2:3: budgets.day: unknown field (known: run, session)"},
		{name: "default_prices not a bool", yaml: "default_prices: no-thanks\n",
			want: "bad.yaml:1:17: default_prices: want true or false"},
		{name: "allow_models empty", yaml: "allow_models: []\n",
			want: "bad.yaml:1:15: allow_models: is empty; leave it out"},
		{name: "allow_models not a list", yaml: "allow_models: openai:*\n",
			want: "bad.yaml:1:15: allow_models: want a list, got a string"},
		{name: "allow_models inner star", yaml: "allow_models: [gpt, \"open*ai:x\"]\n",
			want: `bad.yaml:1:21: allow_models[1]: "open*ai:x": '*' may only end a pattern`},
		{name: "allow_models with a space", yaml: "allow_models: [\"gpt 4\"]\n",
			want: `bad.yaml:1:16: allow_models[0]: "gpt 4": want at most 256 bytes without spaces`},
		{name: "allow_models twice", yaml: "allow_models:\n  - gpt\n  - gpt\n",
			want: `bad.yaml:3:5: allow_models[1]: "gpt" is listed twice`},
		{name: "scripts not a string", yaml: "scripts: [a]\n",
			want: "bad.yaml:1:10: scripts: want a string, got a list"},
		{name: "unknown tool", yaml: "tools: [read_file, shell]\n",
			want: `bad.yaml:1:20: tools[1]: unknown built-in tool "shell"`},
		{name: "tool twice", yaml: "tools:\n  - sleep\n  - sleep\n",
			want: `bad.yaml:3:5: tools[1]: "sleep" is listed twice`},
		{name: "tools not a list", yaml: "tools: read_file\n",
			want: "bad.yaml:1:8: tools: want a list, got a string"},
		{name: "bad approval", yaml: "approvals:\n  write_file: maybe\n",
			want: `bad.yaml:2:15: approvals.write_file: unknown policy "maybe": use allow, ask or deny`},
		{name: "bad pattern", yaml: "approvals:\n  \"mcp__[\": ask\n",
			want: "bad.yaml:2:3: approvals.mcp__[: not a tool name or pattern"},
		{name: "zero steps", yaml: "limits:\n  max_steps: 0\n",
			want: "bad.yaml:2:14: limits.max_steps: must be at least 1, got 0"},
		{name: "steps not a number", yaml: "limits:\n  max_steps: ten\n",
			want: "bad.yaml:2:14: limits.max_steps: want a whole number, got a string"},
		{name: "concurrency of an unknown provider", yaml: "limits:\n  concurrency:\n    gemini: 2\n",
			want: `bad.yaml:3:5: limits.concurrency.gemini: unknown provider "gemini"`},
		{name: "rate of nothing", yaml: "limits:\n  rate:\n    openai: {}\n",
			want: "bad.yaml:3:13: limits.rate.openai: sets neither requests_per_minute nor tokens_per_minute"},
		{name: "rate above the most", yaml: "limits:\n  rate:\n    openai: {requests_per_minute: 1000001}\n",
			want: "bad.yaml:3:35: limits.rate.openai.requests_per_minute: must be at most 1000000, got 1000001"},
		{name: "rate of zero tokens", yaml: "limits:\n  rate:\n    openai: {tokens_per_minute: 0}\n",
			want: "bad.yaml:3:33: limits.rate.openai.tokens_per_minute: must be at least 1, got 0"},
		{name: "rate name too long", yaml: "limits:\n  rate:\n    " + strings.Repeat("a", 201) + ": {requests_per_minute: 5}\n",
			want: "bad.yaml:3:5: limits.rate." + strings.Repeat("a", 201) + ": a limit's name is 1 to 200 bytes with no control characters"},
		{name: "zero queue", yaml: "limits:\n  queued_prompts: 0\n",
			want: "bad.yaml:2:19: limits.queued_prompts: must be at least 1, got 0"},
		{name: "response cap not a number", yaml: "mcp_servers:\n  s:\n    url: https://x.example/mcp\n    max_response_bytes: 1MB\n",
			want: "bad.yaml:4:25: mcp_servers.s.max_response_bytes: want a whole number, got a string"},
		{name: "unknown limit", yaml: "limits:\n  max_cost: 3\n",
			want: "bad.yaml:2:3: limits.max_cost: unknown field (known: answer_bytes, concurrency, config_bytes, delegation_depth, delegation_fan_out, max_steps, max_tokens, prompt_bytes, queued_prompts, rate, schedule_min_interval, schedule_sessions_per_hour, schedules, schedules_per_prefix, staged_steers, steering_bytes)"},
		{name: "server with command and url", yaml: "mcp_servers:\n  fs:\n    command: npx\n    url: http://localhost:3000/mcp\n",
			want: "bad.yaml:2:3: mcp_servers.fs: set command or url, not both"},
		{name: "server with neither", yaml: "mcp_servers:\n  fs:\n    args: [x]\n",
			want: "bad.yaml:2:3: mcp_servers.fs: set command (a stdio server) or url"},
		{name: "server timeout", yaml: "mcp_servers:\n  fs:\n    command: npx\n    timeout: soon\n",
			want: "bad.yaml:4:14: mcp_servers.fs.timeout: want a positive duration"},
		{name: "server sampling policy", yaml: "mcp_servers:\n  fs:\n    command: npx\n    sampling: yes\n",
			want: `bad.yaml:4:15: mcp_servers.fs.sampling: unknown policy "yes": use refuse or allow`},
		{name: "server sampling as a boolean", yaml: "mcp_servers:\n  fs:\n    command: npx\n    sampling: true\n",
			want: `bad.yaml:4:15: mcp_servers.fs.sampling: unknown policy "true": use refuse or allow`},
		{name: "server name", yaml: "mcp_servers:\n  my.server:\n    command: npx\n",
			want: "bad.yaml:2:3: mcp_servers.my.server: a server name is letters, digits, '-' and '_'"},
		{name: "server env name", yaml: "mcp_servers:\n  fs:\n    command: npx\n    env:\n      NOT-A-NAME: x\n",
			want: "bad.yaml:5:7: mcp_servers.fs.env.NOT-A-NAME: not an environment variable name"},
		{name: "headers on a stdio server", yaml: "mcp_servers:\n  fs:\n    command: npx\n    headers: {A: b}\n",
			want: "bad.yaml:2:3: mcp_servers.fs.headers: headers go with url, not command"},
		{name: "repeated key", yaml: "workspace: a\nworkspace: b\n",
			want: "bad.yaml:2:1: workspace: given twice"},
		{name: "not a mapping", yaml: "- models\n",
			want: "bad.yaml:1:1: want a mapping of fields, got a list"},
		{name: "syntax", yaml: "models:\n  g: [\n", want: "bad.yaml: not valid YAML: line"},
		{name: "empty", yaml: "", want: "bad.yaml: the file is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse("bad.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatalf("Parse accepted it: %+v", cfg)
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error:\n%s\nwant it to start with\n%s", err, tc.want)
			}
			var e *Error
			if !errors.As(err, &e) || e.File != "bad.yaml" {
				t.Errorf("error %v is not a *config.Error of bad.yaml", err)
			}
			if tc.secret != "" && strings.Contains(err.Error(), tc.secret) {
				t.Errorf("the error repeats the secret: %s", err)
			}
		})
	}
}

// Every problem is reported, not only the first.
func TestParseReportsEveryProblem(t *testing.T) {
	_, err := Parse("bad.yaml", []byte("modle: x\nlimits:\n  max_steps: 0\ntools: [shell]\n"))
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("error %v is not Errors", err)
	}
	var got []string
	for _, e := range es {
		got = append(got, e.Field)
	}
	if diff := cmp.Diff([]string{"modle", "limits.max_steps", "tools[0]"}, got); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}
}

// prices: and budgets: parse into the worker's table and ceilings, over
// keel's dated default table unless the file turns it off.
func TestPricesAndBudgets(t *testing.T) {
	cfg, err := Parse("keel.yaml", []byte(`prices:
  "anthropic:claude-sonnet-4-5": {input: 2.50, output: 12, cached_input: 0.25, cache_write: 3, web_search: 8, currency: USD}
  "scripted:demo": {input: 1.00, output: 2.00, currency: EUR}
budgets:
  run: {max: 5.00, currency: USD, warn_at: 0.5}
  session: {max_tokens: 100000}
`))
	if err != nil {
		t.Fatal(err)
	}
	table, err := cfg.PriceTable()
	if err != nil {
		t.Fatal(err)
	}
	if got := table["anthropic:claude-sonnet-4-5"]; got != (keel.Price{Currency: "USD", Input: 2.5, Output: 12, CachedInput: 0.25, CacheWrite: 3, WebSearch: 8, Prices: PricesFromFile}) {
		t.Errorf("the file's price does not replace the default: %+v", got)
	}
	if got := table["scripted:demo"]; got.Currency != "EUR" || got.Input != 1 {
		t.Errorf("scripted:demo: %+v", got)
	}
	if got := table["openai:gpt-4o"]; got.Prices != DefaultPricesName() || got.Input <= 0 || !strings.Contains(got.Prices, "estimate") {
		t.Errorf("the default table's entry is missing or unnamed: %+v", got)
	}
	if cfg.RunBudget.Max != 5 || cfg.RunBudget.Currency != "USD" || cfg.RunBudget.Warn() != 0.5 || cfg.SessionBudget.MaxTokens != 100000 {
		t.Errorf("budgets: %+v %+v", cfg.RunBudget, cfg.SessionBudget)
	}

	off, err := Parse("keel.yaml", []byte("default_prices: false\nprices:\n  m: {input: 1, output: 1, currency: USD}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if table, err := off.PriceTable(); err != nil || len(table) != 1 {
		t.Errorf("default_prices: false keeps %d prices (%v), want the file's one", len(table), err)
	}
}

// Every entry of keel's default table is valid, dated and in USD.
func TestDefaultPriceTable(t *testing.T) {
	table, err := DefaultPrices()
	if err != nil {
		t.Fatal(err)
	}
	if len(table) < 10 {
		t.Fatalf("%d default prices", len(table))
	}
	for spec, p := range table {
		if !strings.Contains(spec, ":") || p.Currency != "USD" || p.Output < p.Input || p.Prices == "" {
			t.Errorf("%s: %+v", spec, p)
		}
	}
	// Hosted web search, per thousand searches, where keel's authors
	// read its price: Anthropic's 10 USD, OpenAI's 10 USD on reasoning
	// models and 25 USD on the gpt-4o and gpt-4.1 families.
	for spec, want := range map[string]float64{
		"anthropic:claude-sonnet-4-5": 10, "anthropic:claude-haiku-4-5": 10, "anthropic:claude-opus-4-5": 10,
		"openai:gpt-5": 10, "openai:o3": 10, "openai:gpt-4o": 25, "openai:gpt-4.1-mini": 25,
		"openai:gpt-4.1-nano": 0,
	} {
		if got := table[spec].WebSearch; got != want {
			t.Errorf("%s: web_search %v, want %v", spec, got, want)
		}
	}
	searched := table["anthropic:claude-sonnet-4-5"].Cost(keel.Usage{InputTokens: 1000, OutputTokens: 100, WebSearches: 2})
	if want := int64(0.003e9 + 0.0015e9 + 0.02e9); searched.Nanos != want {
		t.Errorf("a request with two searches costs %d nanos, want %d", searched.Nanos, want)
	}
}
