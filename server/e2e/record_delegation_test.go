package e2e_test

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/internal/delegation"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
)

// TestRecordDelegationHistory records a delegating session and one of its
// children, for server/workflows/replay_test.go (docs/contract.md §21):
//
//	KEEL_RECORD=1 go test -run TestRecordDelegationHistory ./server/e2e
//
// It writes session_delegation_parent.json (a run started as the planner
// agent: its spec's side effect, two children started in one batch,
// their requests reported by signal, their ends, the commit and the
// continue-as-new) and session_delegation_child.json (researcher-1: the
// task's run, an ask_user answered through the parent, an answer that
// fails its schema and its retry, the reports to the parent, the
// workflow's end with its outcome).
func TestRecordDelegationHistory(t *testing.T) {
	var book keeltest.ScriptBook
	factsSchema := json.RawMessage(`{"type":"object","required":["facts"],"properties":{"facts":{"type":"array","items":{"type":"string"}}}}`)
	agents := map[string]delegation.AgentSpec{
		"planner": {Name: "planner", Model: "scripted:rec-planner", Instructions: "Delegate.",
			Tools: []string{"agent__researcher"}, Agents: []string{"researcher"}},
		"researcher": {Name: "researcher", Model: "scripted:rec-researcher", Instructions: "Ask, then answer.",
			Tools: []string{"ask_user"}, OutputSchema: factsSchema},
	}
	r := recordStack(t, 3*time.Minute, devserver.Config{},
		keeltest.WorkerOptions{Models: &book, Tools: notesTools(t), Agents: agents})
	ctx, c := r.ctx, r.c
	book.Add(t, "rec-planner", `{"turns":[
	  {"text":["Splitting."],"tool_calls":[{"id":"c1","name":"agent__researcher","arguments":{"task":"A"}},
	                                       {"id":"c2","name":"agent__researcher","arguments":{"task":"B"}}]},
	  {"text":["Both answered."]}]}`)
	book.Add(t, "rec-researcher", `{"turns":[
	  {"tool_calls":[{"id":"q","name":"ask_user","arguments":{"question":"Which?"}}]},
	  {"failures":[{"kind":"text","text":["not facts"]}],"text":["{\"facts\":[\"found\"]}"]}]}`)
	sess := c.Session("replay-delegation")
	run, err := sess.Send(ctx, "Research A and B.", client.WithConfig(api.RunConfig{Agent: "planner"}))
	require.NoError(t, err)
	// Both children ask; answer each through the parent.
	it := c.Temporal().GetWorkflowHistory(ctx, sess.ID(), "", true, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for asked := 0; asked < 2 && it.HasNext(); {
		ev, err := it.Next()
		require.NoError(t, err)
		if a := ev.GetWorkflowExecutionSignaledEventAttributes(); a != nil && a.GetSignalName() == delegation.SignalChildRequests {
			asked++
		}
	}
	reqs, err := run.Requests(ctx)
	require.NoError(t, err)
	require.Len(t, reqs, 2)
	for _, q := range reqs {
		require.NoError(t, run.Respond(ctx, q.RequestID, "the first"))
	}
	out, err := run.Outcome(ctx)
	require.NoError(t, err)
	require.Equal(t, "Both answered.", out.Text)

	desc, err := c.Temporal().DescribeWorkflowExecution(ctx, sess.ID(), "")
	require.NoError(t, err)
	dir := filepath.Join("..", "workflows", "testdata")
	writeHistoryOf(t, ctx, c.Temporal(), sess.ID(), desc.GetWorkflowExecutionInfo().GetFirstRunId(),
		filepath.Join(dir, "session_delegation_parent.json"))
	writeHistoryOf(t, ctx, c.Temporal(), childAt(t, reqs, "researcher-1"), "", filepath.Join(dir, "session_delegation_child.json"))
}

// childAt returns the session of the child at path, as the parent's
// requests name it: its ID ends in what the parent drew.
func childAt(t *testing.T, reqs []api.HostRequest, path string) string {
	t.Helper()
	for _, q := range reqs {
		if q.Path == path {
			return q.SessionID
		}
	}
	t.Fatalf("no request of %s among %+v", path, reqs)
	return ""
}
