package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/internal/delegation"
)

// testAgents are the shared worker's agents (docs/contract.md §21.2): a
// planner whose answer has a schema, delegating to a researcher that asks
// the host and answers with facts.
var testAgents = map[string]delegation.AgentSpec{
	"planner": {Name: "planner", Model: "scripted:e2e-planner", Instructions: "Delegate.",
		Tools: []string{"agent__researcher"}, Agents: []string{"researcher"},
		OutputSchema: json.RawMessage(`{"type":"object","required":["summary"],"properties":{"summary":{"type":"string"}}}`)},
	"researcher": {Name: "researcher", Model: "scripted:e2e-researcher", Instructions: "Ask, then answer.",
		Tools:        []string{"ask_user"},
		OutputSchema: json.RawMessage(`{"type":"object","required":["facts"],"properties":{"facts":{"type":"array"}}}`)},
}

// waitSignals follows a workflow's history until it holds n signals
// named name.
func waitSignals(t *testing.T, ctx context.Context, c *client.Client, workflowID, name string, n int) {
	t.Helper()
	it := c.Temporal().GetWorkflowHistory(ctx, workflowID, "", true, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	seen := 0
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetWorkflowExecutionSignaledEventAttributes(); a != nil && a.GetSignalName() == name {
			if seen++; seen == n {
				return
			}
		}
	}
	t.Fatalf("%s ended before %d %s signals", workflowID, n, name)
}

// docs/contract.md §21: a run started as an agent delegates to two
// children in one batch; each asks the host; the parent lists both
// questions with the children's paths and sessions, and answers given
// to the parent's run reach the children; the children's structured
// answers are the calls' results; the parent's own typed answer decodes
// into a struct.
func TestAgentsDelegateAndAnswerFromTheParent(t *testing.T) {
	ctx := testCtx(t)
	shared.book.Add(t, "e2e-planner", `{"turns":[
	  {"tool_calls":[{"id":"c1","name":"agent__researcher","arguments":{"task":"A"}},
	                 {"id":"c2","name":"agent__researcher","arguments":{"task":"B"}}]},
	  {"text":["{\"summary\": \"A and B\"}"]}]}`)
	shared.book.Add(t, "e2e-researcher", `{"turns":[
	  {"tool_calls":[{"id":"q","name":"ask_user","arguments":{"question":"Which one?"}}]},
	  {"text":["{\"facts\": [\"known\"]}"]}]}`)
	c := newClient(t)
	sess := c.Session("e2e-agents")
	run, err := sess.Send(ctx, "research", client.WithConfig(api.RunConfig{Agent: "planner"}))
	if err != nil {
		t.Fatal(err)
	}
	// Each child reports its question to the parent (a signal).
	waitSignals(t, ctx, c, "e2e-agents", delegation.SignalChildRequests, 2)
	reqs, err := run.Requests(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 2 {
		t.Fatalf("the parent lists %d requests, want both children's: %+v", len(reqs), reqs)
	}
	var children []string
	for _, r := range reqs {
		children = append(children, r.SessionID)
		if r.Path == "" || !strings.HasPrefix(r.SessionID, "e2e-agents--"+r.Path+"-") || !api.IsChildSessionID(r.SessionID) || r.RequestID != r.Path+":q/ask_user" || r.Prompt != "Which one?" {
			t.Fatalf("request %+v", r)
		}
	}
	st, err := sess.State(ctx)
	if err != nil || st.State != keel.StateWaitingForHostInput {
		t.Fatalf("parent state %s (%v)", st.State, err)
	}
	if err := run.Respond(ctx, "researcher-9:q/ask_user", "x"); !errors.Is(err, keel.ErrUnknownRequest) {
		t.Fatalf("an answer for no child: %v", err)
	}
	for _, r := range reqs {
		if err := run.Respond(ctx, r.RequestID, "the first"); err != nil {
			t.Fatalf("respond %s: %v", r.RequestID, err)
		}
	}
	out, err := run.Outcome(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var summary struct {
		Summary string `json:"summary"`
	}
	if err := out.DecodeAnswer(&summary); err != nil || summary.Summary != "A and B" {
		t.Fatalf("the parent's answer %s: %+v (%v)", out.Answer, summary, err)
	}
	log := logOf(t, ctx, sess)
	var results []string
	for _, ev := range log {
		if ev.Type == keel.TypeToolFinished {
			e, _ := ev.Event()
			results = append(results, e.(keel.ToolFinished).Output)
		}
	}
	if len(results) != 2 || results[0] != `{"facts":["known"]}` || results[1] != results[0] {
		t.Fatalf("call results %q", results)
	}
	// Each child's log is whole and its own: the answer it got included.
	for _, id := range children {
		clog := logOf(t, ctx, c.Session(id))
		if types := typesOf(clog, ""); types[0] != keel.TypeRunStarted || types[len(types)-1] != keel.TypeRunCompleted {
			t.Fatalf("%s: %v", id, types)
		}
		resolved := false
		for _, ev := range clog {
			resolved = resolved || ev.Type == keel.TypeHostInputResolved
		}
		if !resolved {
			t.Fatalf("%s never took its answer", id)
		}
		cst, err := c.Session(id).State(ctx)
		if err != nil || cst.State != keel.StateCompleted || cst.Delegated == nil || cst.Delegated.Parent != "e2e-agents" {
			t.Fatalf("%s state %+v (%v)", id, cst, err)
		}
		// A child takes no prompts of its own.
		if _, err := c.Session(id).Send(ctx, "more"); err == nil {
			t.Fatalf("%s took a prompt", id)
		}
	}
	if out.UsageTotal.Requests != 2+2*2 {
		t.Fatalf("usage rolls up: %d requests, want the planner's 2 and the children's 4", out.UsageTotal.Requests)
	}
}
