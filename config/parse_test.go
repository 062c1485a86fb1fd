package config

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/tool/mcp"
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
			want: "bad.yaml:2:1: modle: unknown field (known: allow_models, approvals, default_model, limits, mcp_servers, models, scripts, tools, workspace)"},
		{name: "literal key", yaml: "models:\n  gpt:\n    provider: openai\n    model: m\n    api_key: sk-live-0123456789\n",
			want: "bad.yaml:5:5: models.gpt.api_key: keys and secrets never go", secret: "sk-live-0123456789"},
		{name: "key pasted as variable name", yaml: "models:\n  gpt:\n    provider: openai\n    model: m\n    api_key_env: sk-live-0123456789\n",
			want: "bad.yaml:5:18: models.gpt.api_key_env: want the name of an environment variable", secret: "sk-live-0123456789"},
		{name: "unknown model field", yaml: "models:\n  gpt:\n    provider: openai\n    model: m\n    temperature: 0.2\n",
			want: "bad.yaml:5:5: models.gpt.temperature: unknown field (known: api_key_env, base_url, max_tokens, model, provider)"},
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
			want: "bad.yaml:2:3: models.s: a scripted model takes no base_url, api_key_env or max_tokens"},
		{name: "default names nothing", yaml: "models:\n  g:\n    provider: openai\n    model: m\ndefault_model: gpt\n",
			want: `bad.yaml:5:16: default_model: names no model under models: "gpt"`},
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
		{name: "zero queue", yaml: "limits:\n  queued_prompts: 0\n",
			want: "bad.yaml:2:19: limits.queued_prompts: must be at least 1, got 0"},
		{name: "response cap not a number", yaml: "mcp_servers:\n  s:\n    url: https://x.example/mcp\n    max_response_bytes: 1MB\n",
			want: "bad.yaml:4:25: mcp_servers.s.max_response_bytes: want a whole number, got a string"},
		{name: "unknown limit", yaml: "limits:\n  max_cost: 3\n",
			want: "bad.yaml:2:3: limits.max_cost: unknown field (known: answer_bytes, concurrency, config_bytes, max_steps, max_tokens, prompt_bytes, queued_prompts, staged_steers, steering_bytes)"},
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
