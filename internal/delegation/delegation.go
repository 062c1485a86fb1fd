// Package delegation holds what passes between keel's own sessions when
// one delegates to another (docs/contract.md §21), and the worker's side
// of it: the agents a worker defines, its limits of delegation, the
// child's result and its signal of open requests to its parent, and the
// child's session ID. Callers see a delegation only through api's
// Delegation, ChildRef and HostRequest in a session's state.
package delegation

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
)

// AgentSpec is a named agent as the worker defines it (keel.yaml's agents,
// docs/contract.md §21.2): a client names it (api.RunConfig.Agent) and
// never supplies what it holds. It travels in history (recorded when a run
// starts as the agent, or with the model turn that delegates to it), so
// it never holds secrets.
type AgentSpec struct {
	// Name is the agent's name: letters, digits, '-' and '_', starting
	// with a letter, at most api.MaxAgentNameBytes (api.ValidAgentName).
	Name string `json:"name"`
	// Description says what the agent does, for the delegation tool that
	// runs it. Optional.
	Description string `json:"description,omitempty"`
	// Model is the model spec the agent runs on. Optional: the run's.
	Model string `json:"model,omitempty"`
	// Instructions are the agent's system prompt.
	Instructions string `json:"instructions,omitempty"`
	// Tools are the tools the agent may call, the delegation tools of
	// Agents included (agent__NAME).
	Tools []string `json:"tools"`
	// Agents are the agents it may delegate to.
	Agents []string `json:"agents,omitempty"`
	// MaxSteps and MaxTokens bound its runs. Optional: the defaults.
	MaxSteps  int `json:"max_steps,omitempty"`
	MaxTokens int `json:"max_tokens,omitempty"`
	// OutputSchema is the JSON Schema its answers must match (§21.1).
	// Optional.
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	// Reasoning is what its runs ask of the model (keel.Reasoning).
	// Optional: the run's own.
	Reasoning *keel.Reasoning `json:"reasoning,omitempty"`
	// Hooks are hooks the worker offers that run at its runs' boundaries,
	// before those the run names itself (docs/contract.md §23).
	// Optional.
	Hooks []string `json:"hooks,omitempty"`
	// Detached makes a delegation to it run in the background, as a
	// detached tool does (§8). Optional.
	Detached bool `json:"detached,omitempty"`
}

// Apply returns the run configuration of a run of the agent: cfg (the
// session's defaults and the send's own) with the agent's model,
// instructions, tools, limits and output schema in place of cfg's. A
// caller's max_steps may only lower the agent's.
func (a AgentSpec) Apply(cfg api.RunConfig) api.RunConfig {
	cfg.Agent = a.Name
	if a.Model != "" {
		cfg.Model = a.Model
	}
	cfg.System = a.Instructions
	cfg.Tools = append([]string{}, a.Tools...)
	if a.MaxSteps > 0 && (cfg.MaxSteps <= 0 || a.MaxSteps < cfg.MaxSteps) {
		cfg.MaxSteps = a.MaxSteps
	}
	if a.MaxTokens > 0 {
		cfg.MaxTokens = a.MaxTokens
	}
	cfg.OutputSchema = a.OutputSchema
	if a.Reasoning != nil {
		cfg.Reasoning = a.Reasoning
	}
	if len(a.Hooks) > 0 {
		hooks := append([]string{}, a.Hooks...)
		for _, h := range cfg.Hooks {
			if !slices.Contains(hooks, h) {
				hooks = append(hooks, h)
			}
		}
		cfg.Hooks = hooks
	}
	return cfg
}

// Limits of delegation (docs/contract.md §21.5): how deep children may
// nest below a session a client started, and how many children one run
// may have running at once. keel.yaml's limits may set others.
const (
	DefaultDelegationDepth  = 3
	DefaultDelegationFanOut = 4
)

// DelegationLimits are the worker's limits of delegation, recorded with
// the model turn that delegates so that a replay decides as the run did.
type DelegationLimits struct {
	// Depth is the deepest a child may be (a client's session is depth
	// 0). Default DefaultDelegationDepth.
	Depth int `json:"depth,omitempty"`
	// FanOut is how many children one run may have running at once; a
	// delegation past it waits for one to end. Default
	// DefaultDelegationFanOut.
	FanOut int `json:"fan_out,omitempty"`
}

// WithDefaults fills in the defaults.
func (l DelegationLimits) WithDefaults() DelegationLimits {
	if l.Depth <= 0 {
		l.Depth = DefaultDelegationDepth
	}
	if l.FanOut <= 0 {
		l.FanOut = DefaultDelegationFanOut
	}
	return l
}

// DelegationResult is what a child session returns to its parent when its
// one run is committed.
type DelegationResult struct {
	Outcome keel.Outcome `json:"outcome"`
	// Undelivered are the logs of the child, and of its own ended
	// children, that its event sinks may not all have received: the
	// parent delivers them from there (docs/contract.md §23.6).
	Undelivered []SinkLog `json:"undelivered,omitempty"`
}

// SinkLog is a session's durable log as the worker's event sinks have
// received it: its last sequence, and by sink name the sequence each
// sink has received up to. A session that ends its workflow (a child)
// hands its own to whoever goes on delivering it.
type SinkLog struct {
	SessionID string           `json:"session_id"`
	Seq       int64            `json:"seq"`
	Sinks     map[string]int64 `json:"sinks,omitempty"`
}

// ChildRequests is the signal a child session sends its parent whenever
// the host-input requests open in it, or in its own children, change:
// all of them, each with its path from the parent (docs/contract.md
// §21.4).
type ChildRequests struct {
	Path     string            `json:"path"`
	Requests []api.HostRequest `json:"requests"`
}

// SignalChildRequests carries ChildRequests from a child to its parent.
const SignalChildRequests = "child_requests"

// ChildPath is the path of a parent's n-th delegation to agent.
func ChildPath(agent string, n int) string { return fmt.Sprintf("%s-%d", agent, n) }

// ChildNonceBytes is how many random bytes, as hex, end a child session's
// ID: the parent draws them as it delegates, so no one can know the ID,
// and take it, before the parent starts the child (docs/contract.md §21.3).
// api.IsChildSessionID knows the same length.
const ChildNonceBytes = 8

// ChildSessionID is the session ID of the child at path of session parent,
// ending in nonce (hex of ChildNonceBytes random bytes):
// "<parent>--<path>-<nonce>", within keel.MaxIDLength. A parent whose ID
// leaves no room is shortened to its first characters and a hash of the
// whole, so two parents never share a child ID. Every such ID has the form
// api.IsChildSessionID recognizes.
func ChildSessionID(parent, path, nonce string) string {
	tail := "--" + path + "-" + nonce
	if len(parent)+len(tail) <= keel.MaxIDLength {
		return parent + tail
	}
	sum := sha256.Sum256([]byte(parent))
	short := hex.EncodeToString(sum[:8])
	keep := keel.MaxIDLength - len(tail) - len(short) - 1
	return parent[:keep] + "-" + short + tail
}
