package api

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/keelrun/keel"
)

// AgentSpec is a named agent as the worker defines it (keel.yaml's agents,
// docs/contract.md §21.2): a client names it (RunConfig.Agent) and never
// supplies what it holds. It travels in history (recorded when a run
// starts as the agent, or with the model turn that delegates to it), so
// it never holds secrets.
type AgentSpec struct {
	// Name is the agent's name: letters, digits, '-' and '_', starting
	// with a letter, at most MaxAgentNameBytes.
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
	// Detached makes a delegation to it run in the background, as a
	// detached tool does (§8). Optional.
	Detached bool `json:"detached,omitempty"`
}

// MaxAgentNameBytes bounds an agent's name, so that child session IDs
// derived from it stay within keel.MaxIDLength.
const MaxAgentNameBytes = 32

// ValidAgentName reports whether s can name an agent.
func ValidAgentName(s string) bool {
	if s == "" || len(s) > MaxAgentNameBytes || !(s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z') {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// Apply returns the run configuration of a run of the agent: cfg (the
// session's defaults and the send's own) with the agent's model,
// instructions, tools, limits and output schema in place of cfg's. A
// caller's max_steps may only lower the agent's.
func (a AgentSpec) Apply(cfg RunConfig) RunConfig {
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

// Delegation is what a child session is started with (SessionInput): who
// delegated to it, and the task that is its one run.
type Delegation struct {
	// Parent and ParentRun name the delegating session and run;
	// ToolCallID the call that delegated.
	Parent     string `json:"parent"`
	ParentRun  string `json:"parent_run"`
	ToolCallID string `json:"tool_call_id"`
	Agent      string `json:"agent"`
	// Path names the child from its parent ("researcher-3").
	Path string `json:"path"`
	// Depth is 1 for a child of a client's session, 2 below that, ...
	Depth int `json:"depth"`
	// Prompt is the child's one run's prompt: the task and its context.
	Prompt string `json:"prompt"`
	// Relay is where the child's live deltas are relayed besides its own
	// stream: its parent first, then the parent's ancestors, each with
	// the path that names the child there (docs/contract.md §21.4).
	Relay []RelayTarget `json:"relay,omitempty"`
}

// RelayTarget is a stream a child's deltas are copied to.
type RelayTarget struct {
	SessionID string `json:"session_id"`
	RunID     string `json:"run_id"`
	// Path names the child in that session ("researcher-3",
	// "researcher-3/coder-1").
	Path string `json:"path"`
	// AfterSeq is that session's agent.started sequence of the branch:
	// relayed deltas are ordered after it.
	AfterSeq int64 `json:"after_seq"`
}

// DelegationResult is what a child session returns to its parent when its
// one run is committed.
type DelegationResult struct {
	Outcome keel.Outcome `json:"outcome"`
}

// ChildRequests is the signal a child session sends its parent whenever
// the host-input requests open in it, or in its own children, change:
// all of them, each with its path from the parent (docs/contract.md
// §21.4).
type ChildRequests struct {
	Path     string        `json:"path"`
	Requests []HostRequest `json:"requests"`
}

// SignalChildRequests carries ChildRequests from a child to its parent.
const SignalChildRequests = "child_requests"

// ChildPath is the path of a parent's n-th delegation to agent.
func ChildPath(agent string, n int) string { return fmt.Sprintf("%s-%d", agent, n) }

// ChildNonceBytes is how many random bytes, as hex, end a child session's
// ID: the parent draws them as it delegates, so no one can know the ID,
// and take it, before the parent starts the child (docs/contract.md §21.3).
const ChildNonceBytes = 8

// ChildSessionID is the session ID of the child at path of session parent,
// ending in nonce (hex of ChildNonceBytes random bytes):
// "<parent>--<path>-<nonce>", within keel.MaxIDLength. A parent whose ID
// leaves no room is shortened to its first characters and a hash of the
// whole, so two parents never share a child ID.
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

// IsChildSessionID reports whether id has the form of ChildSessionID's
// IDs. Only a parent's delegation starts a session so named: clients
// refuse to send to one, fork into one or schedule for one, so that a
// caller who may create sessions under a parent's prefix cannot pass one
// off as a child (docs/contract.md §21.3).
func IsChildSessionID(id string) bool {
	rest, nonce, ok := cutLast(id)
	if !ok || len(nonce) != 2*ChildNonceBytes || strings.Trim(nonce, "0123456789abcdef") != "" {
		return false
	}
	rest, n, ok := cutLast(rest)
	if !ok || n == "" || strings.Trim(n, "0123456789") != "" {
		return false
	}
	// rest is "<parent>--<agent>": a "--" with something on each side.
	return len(rest) > 3 && strings.Contains(rest[1:len(rest)-1], "--")
}

// cutLast cuts s around its last '-'.
func cutLast(s string) (before, after string, ok bool) {
	i := strings.LastIndexByte(s, '-')
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+1:], true
}
