package transcript

import (
	"strings"

	"github.com/keelrun/keel"
)

// Agent is the card of a child session (docs/contract.md §21.3): the
// agent it runs, its session (none once agent.finished says the parent
// could not start it), how it ended, and the text it streams as its
// deltas are relayed to the parent (§21.4). Text is what the child's live
// attempts streamed, step after step; a relayed delta of a later attempt
// of a step replaces that step's text, as a reset would (the child's own
// log has its provider.stream_reset; the parent's has none). Nested holds
// the cards of the child's own children, named by their paths below it,
// which only their relayed deltas make.
type Agent struct {
	ToolCallID string         `json:"tool_call_id"`
	Agent      string         `json:"agent"`
	SessionID  string         `json:"session_id"`
	Path       string         `json:"path"`
	Status     keel.RunStatus `json:"status"`
	Text       string         `json:"text"`
	Usage      Usage          `json:"usage"`
	Error      *keel.Error    `json:"error,omitempty"`
	Nested     []*Agent       `json:"nested,omitempty"`
	Truncated  bool           `json:"truncated,omitempty"`
	nested     map[string]*Agent
	step, att  int
	stepBegins int
}

func (r *Run) agentStarted(e keel.AgentStarted, ch *Change) Reason {
	if a := r.agents[e.Path]; a != nil {
		ch.Agent = a
		if a.ToolCallID != "" {
			return ReasonDuplicate
		}
	}
	a := r.agent(e.Path)
	a.ToolCallID, a.Agent, a.SessionID = cut(e.ToolCallID, MaxField), cut(e.Agent, MaxField), cut(e.SessionID, MaxField)
	if a.Status == "" {
		a.Status = keel.StatusActive
	}
	ch.Agent = a
	return ""
}

func (r *Run) agentFinished(e keel.AgentFinished, ch *Change) Reason {
	a := r.agent(e.Path)
	ch.Agent = a
	if a.Status != "" && a.Status != keel.StatusActive {
		return ReasonDuplicate
	}
	a.Status = keel.RunStatus(cut(string(e.Status), MaxField))
	a.Usage = usageOf(e.Usage)
	if e.Error != nil {
		a.Error = &keel.Error{Code: keel.Code(cut(string(e.Error.Code), MaxField)), Message: cut(e.Error.Message, MaxField)}
	}
	if a.ToolCallID == "" {
		a.ToolCallID, a.Agent, a.SessionID = cut(e.ToolCallID, MaxField), cut(e.Agent, MaxField), cut(e.SessionID, MaxField)
	}
	if e.SessionID == "" {
		// The parent could not start the child: whatever holds the ID
		// agent.started named is not its child (docs/contract.md §21.3).
		a.SessionID = ""
	}
	return ""
}

// agent returns the card of the child at path, making one first.
func (r *Run) agent(path string) *Agent {
	path = cut(path, MaxField)
	if a := r.agents[path]; a != nil {
		return a
	}
	a := &Agent{Path: path}
	r.agents[path] = a
	r.Agents = append(r.Agents, a)
	return a
}

// relayed applies a child's delta to its card: the card of the path's
// first segment, or a nested card below it.
func (r *Run) relayed(path string, ev keel.Event, ch *Change) Reason {
	top, rest, _ := strings.Cut(path, "/")
	a := r.agents[top]
	if a == nil {
		return ReasonUnknownRun
	}
	if a.Status != keel.StatusActive {
		return ReasonEnded
	}
	for rest != "" {
		var seg string
		seg, rest, _ = strings.Cut(rest, "/")
		a = a.child(seg)
	}
	ch.Agent = a
	var step, attempt int
	var text string
	switch e := ev.(type) {
	case keel.TextDelta:
		step, attempt, text = e.Step, e.Attempt, e.Text
	default:
		// Reasoning, drafts of calls and progress stay in the child's
		// own log and stream.
		return ""
	}
	switch {
	case step < 1 || attempt < 1:
		return ReasonInvalid
	case text == "":
		return ReasonEmpty
	case step < a.step || step == a.step && attempt < a.att:
		return ReasonAbandoned
	case step > a.step:
		a.step, a.att, a.stepBegins = step, attempt, len(a.Text)
		if a.Text != "" {
			a.Text += "\n"
			a.stepBegins = len(a.Text)
		}
	case attempt > a.att:
		// A later attempt of the step: the earlier one's text is gone.
		a.att = attempt
		a.Text = a.Text[:a.stepBegins]
		ch.Discarded = true
	}
	if len(a.Text)+len(text) > MaxText {
		a.Truncated = true
	}
	a.Text = cut(a.Text+text, MaxText)
	ch.Text = text
	return ""
}

// child returns the nested card of the child at seg below a.
func (a *Agent) child(seg string) *Agent {
	if a.nested == nil {
		a.nested = map[string]*Agent{}
	}
	if c := a.nested[seg]; c != nil {
		return c
	}
	c := &Agent{Path: a.Path + "/" + cut(seg, MaxField), Status: keel.StatusActive}
	a.nested[seg] = c
	a.Nested = append(a.Nested, c)
	return c
}
