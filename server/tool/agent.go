package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/keelrun/keel"
)

// Delegation tools (docs/contract.md §21.3): an agent that may hand work to
// another agent NAME sees a tool AgentToolPrefix+NAME. Its call runs NAME
// as a child session, started by the calling run's workflow (NativeAgent),
// and its result is the child's answer.
const (
	// NativeAgent is the native kind of a delegation tool.
	NativeAgent = "agent"
	// AgentToolPrefix starts the name of every delegation tool.
	AgentToolPrefix = "agent__"
	// MaxAgentContextBytes bounds a delegation's context; its task and
	// context together become the child's prompt, which the session's
	// prompt limit bounds as well.
	MaxAgentContextBytes = 128 << 10
)

var agentToolSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"task":{"type":"string","minLength":1,"description":"What the agent is to do, complete in itself: it sees nothing of this conversation."},` +
	`"context":{"type":"string","description":"Optional facts the agent needs, such as what you learned so far."}},` +
	`"required":["task"],"additionalProperties":false}`)

// AgentTool returns the delegation tool for agent name: described to the
// model with description (what the agent does), detached when the agent
// runs in the background (its result arrives later, as a detached tool's
// does).
func AgentTool(name, description string, detached bool) Tool {
	return agentTool{name: name, description: description, detached: detached}
}

type agentTool struct {
	name, description string
	detached          bool
}

var (
	_ Native   = agentTool{}
	_ Detacher = agentTool{}
)

func (a agentTool) Spec() keel.ToolSpec {
	desc := "Hand a task to the agent " + a.name + " and get its answer."
	if a.description != "" {
		desc += " " + a.description
	}
	return keel.ToolSpec{Name: AgentToolPrefix + a.name, Description: desc, Parameters: agentToolSchema}
}

func (agentTool) NativeKind() string { return NativeAgent }
func (a agentTool) Detached() bool   { return a.detached }

// errAgentOutsideWorkflow is the result of calling a delegation tool
// outside keel's workflows, where no child session can start.
var errAgentOutsideWorkflow = errors.New("tool: delegation runs only in a keel session")

func (a agentTool) Call(context.Context, json.RawMessage) (Result, error) {
	return Result{}, errAgentOutsideWorkflow
}

// AgentTask is what a delegation call asks of its agent.
type AgentTask struct {
	Task    string `json:"task"`
	Context string `json:"context,omitempty"`
}

// Prompt is the child's prompt: the task, then the context.
func (t AgentTask) Prompt() string {
	if t.Context == "" {
		return t.Task
	}
	return t.Task + "\n\nContext:\n" + t.Context
}

// ParseAgentTask reads a delegation call's arguments. It returns an
// *ArgumentError for anything but {"task": non-empty string, "context":
// optional string of at most MaxAgentContextBytes}. It is deterministic,
// for use in workflow code.
func ParseAgentTask(name string, args json.RawMessage) (AgentTask, error) {
	bad := func(format string, a ...any) (AgentTask, error) {
		return AgentTask{}, &ArgumentError{Tool: name, Problems: []string{fmt.Sprintf(format, a...)}}
	}
	var in struct {
		Task    *string `json:"task"`
		Context string  `json:"context"`
	}
	dec := json.NewDecoder(bytes.NewReader(normalizeArgs(args)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return bad(`want {"task": string, "context": optional string}: %v`, err)
	}
	if in.Task == nil || strings.TrimSpace(*in.Task) == "" {
		return bad(`"task" must be a non-empty string`)
	}
	if len(in.Context) > MaxAgentContextBytes {
		return bad(`"context" is %d bytes; the limit is %d`, len(in.Context), MaxAgentContextBytes)
	}
	return AgentTask{Task: *in.Task, Context: in.Context}, nil
}
