package keel

// Delegation: a run's tool call that runs another agent as a child
// session (docs/contract.md §21.3). The parent's log records the child's
// start and end; the child's own log holds the rest.

// Wire names of the delegation events.
const (
	TypeAgentStarted  = "agent.started"
	TypeAgentFinished = "agent.finished"
)

func init() {
	register[AgentStarted](TypeAgentStarted)
	register[AgentFinished](TypeAgentFinished)
}

// AgentStarted says a tool call started a child session: the agent it
// runs, the child's session ID (its own log: keel events SESSION) and its
// path, which the child's relayed deltas carry (Envelope.Path).
type AgentStarted struct {
	ToolCallID string `json:"tool_call_id"`
	Agent      string `json:"agent"`
	SessionID  string `json:"session_id"`
	Path       string `json:"path"`
}

// AgentFinished says a child session's run was committed: how it ended,
// and its usage (all its requests, abandoned ones included), which the
// parent's run counts as its own. SessionID is empty when the parent
// could not start the child (its ID taken): whatever holds the ID that
// AgentStarted named is not the parent's child.
type AgentFinished struct {
	ToolCallID string    `json:"tool_call_id"`
	Agent      string    `json:"agent"`
	SessionID  string    `json:"session_id"`
	Path       string    `json:"path"`
	Status     RunStatus `json:"status"`
	Steps      int       `json:"steps"`
	Usage      Usage     `json:"usage"`
	Error      *Error    `json:"error,omitempty"`
}

func (AgentStarted) EventType() string  { return TypeAgentStarted }
func (AgentFinished) EventType() string { return TypeAgentFinished }
