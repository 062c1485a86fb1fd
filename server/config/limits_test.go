package config

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/ratelimit"
	"github.com/keelrun/keel/internal/schedreg"
	"github.com/keelrun/keel/server/tool"
	"github.com/keelrun/keel/server/worker"
)

// keel.yaml's input limits reach worker.Options.Limits, and an MCP
// server's response cap its mcp.ServerConfig.
func TestApplyLimits(t *testing.T) {
	cfg, err := Parse("keel.yaml", []byte(`limits:
  max_steps: 3
  prompt_bytes: 1000
  steering_bytes: 2000
  answer_bytes: 3000
  config_bytes: 4000
  queued_prompts: 5
  staged_steers: 6
  schedules: 40
  schedules_per_prefix: 8
  schedule_min_interval: 5m
  schedule_sessions_per_hour: 3
mcp_servers:
  s:
    command: srv
    max_response_bytes: 7000
`))
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tool.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	opts := worker.Options{Tools: reg}
	if err := cfg.Apply(&opts); err != nil {
		t.Fatal(err)
	}
	want := api.Limits{PromptBytes: 1000, SteeringBytes: 2000, AnswerBytes: 3000, ConfigBytes: 4000,
		QueuedPrompts: 5, StagedSteers: 6}
	if diff := cmp.Diff(want, opts.Limits); diff != "" {
		t.Errorf("Options.Limits (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(schedreg.ScheduleLimits{Schedules: 40, PerPrefix: 8, MinInterval: keel.Duration(5 * time.Minute),
		SessionsPerHour: 3}, opts.Schedules); diff != "" {
		t.Errorf("Options.Schedules (-want +got):\n%s", diff)
	}
	if opts.Policy.MaxSteps != 3 {
		t.Errorf("Policy.MaxSteps = %d, want 3", opts.Policy.MaxSteps)
	}
	if len(opts.MCPServers) != 1 || opts.MCPServers[0].MaxResponseBytes != 7000 {
		t.Errorf("MCPServers = %+v, want one with MaxResponseBytes 7000", opts.MCPServers)
	}
}

// keel.yaml's rate limits reach the worker's policy (docs/contract.md
// §20.5), by provider, "provider:model" or model spec.
func TestApplyRateLimits(t *testing.T) {
	cfg, err := Parse("keel.yaml", []byte(`limits:
  rate:
    anthropic: {requests_per_minute: 50, tokens_per_minute: 40000}
    "openai:gpt-4.1-mini": {requests_per_minute: 500}
`))
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tool.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	opts := worker.Options{Tools: reg}
	if err := cfg.Apply(&opts); err != nil {
		t.Fatal(err)
	}
	want := map[string]ratelimit.RateLimit{
		"anthropic":           {RequestsPerMinute: 50, TokensPerMinute: 40000},
		"openai:gpt-4.1-mini": {RequestsPerMinute: 500},
	}
	if diff := cmp.Diff(want, opts.Policy.RateLimits); diff != "" {
		t.Errorf("Policy.RateLimits (-want +got):\n%s", diff)
	}
}
