package api

import "strings"

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

// Delegation is what a child session is started with: who delegated to
// it, and the task that is its one run. A child's state shows it
// (SessionStatus.Delegated).
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

// childNonceBytes is how many random bytes, as hex, end a child
// session's ID (docs/contract.md §21.3): the parent draws them as it
// delegates.
const childNonceBytes = 8

// IsChildSessionID reports whether id has the form of a child session's
// ID, "<parent>--<agent>-<n>-<nonce>", the nonce being childNonceBytes
// as hex. Only a parent's delegation starts a session so named: clients
// refuse to send to one, fork into one or schedule for one, so that a
// caller who may create sessions under a parent's prefix cannot pass one
// off as a child (docs/contract.md §21.3).
func IsChildSessionID(id string) bool {
	rest, nonce, ok := cutLast(id)
	if !ok || len(nonce) != 2*childNonceBytes || strings.Trim(nonce, "0123456789abcdef") != "" {
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
