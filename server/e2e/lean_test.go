package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/internal/delegation"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
)

// A lean session (api.ShapeLean: every session keel's clients start)
// upserts no search attribute in any execution, and the child sessions it
// delegates to start without KeelState and upsert none either. A session
// started as keel v0.1.0's clients did keeps v0.1.0's shape in every
// execution and child, so that those clients, which read its markers,
// follow it: each run's execution upserts KeelState at the run's start
// and end. Outcome reads each run's outcome either way.
func TestLeanSessionsUpsertNothing(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	srv := keeltest.StartServer(t, devserver.Config{})
	var book keeltest.ScriptBook
	book.Add(t, "lean-lead", `{"repeat":true,"turns":[
	  {"tool_calls":[{"id":"h","name":"agent__helper","arguments":{"task":"help"}}]},{"text":["led"]}]}`)
	book.Add(t, "lean-helper", `{"repeat":true,"turns":[{"text":["helped"]}]}`)
	keeltest.StartWorker(t, srv, keeltest.WorkerOptions{Models: &book, Agents: map[string]delegation.AgentSpec{
		"lead":   {Name: "lead", Model: "scripted:lean-lead", Instructions: "Delegate.", Tools: []string{"agent__helper"}, Agents: []string{"helper"}},
		"helper": {Name: "helper", Model: "scripted:lean-helper", Instructions: "Help."},
	}})
	c := keeltest.Client(t, srv, nil)
	keeltest.StartReleasedSession(t, c, "released")
	for _, id := range []string{"lean", "released"} {
		for range 2 {
			run, err := c.Session(id).Send(ctx, "go", client.WithConfig(api.RunConfig{Agent: "lead"}))
			require.NoError(t, err)
			out, err := run.Outcome(ctx)
			require.NoError(t, err)
			require.Equal(t, "led", out.Text)
		}
	}

	tc := c.Temporal()
	for _, id := range []string{"lean", "released"} {
		execs := executionsOf(t, ctx, tc, id)
		require.Len(t, execs, 3, "%s: two runs, each continued as new", id)
		var children []string
		for i, h := range execs {
			ups := upserts(t, h)
			if id == "released" && i < 2 {
				require.GreaterOrEqual(t, len(ups), 2, "execution %d of the v0.1.0 session upserts", i+1)
				require.Equal(t, map[string]any{"KeelState": string(keel.StateRunning), "KeelRunNumber": float64(i + 1), "KeelModel": "scripted:lean-lead"}, ups[0])
				require.Equal(t, map[string]any{"KeelState": string(keel.StateCompleted)}, ups[len(ups)-1])
			} else {
				require.Empty(t, ups, "%s: execution %d of a lean session upserted", id, i+1)
			}
			for _, ev := range h {
				if a := ev.GetStartChildWorkflowExecutionInitiatedEventAttributes(); a != nil {
					fields := a.GetSearchAttributes().GetIndexedFields()
					require.NotContains(t, fields, api.AttrState.GetName(), "%s: a child started with KeelState", id)
					require.Contains(t, fields, api.AttrSessionID.GetName())
					children = append(children, a.GetWorkflowId())
				}
			}
		}
		require.Len(t, children, 2, "%s: one child a run", id)
		for _, child := range children {
			for _, h := range executionsOf(t, ctx, tc, child) {
				if id == "released" {
					require.NotEmpty(t, upserts(t, h), "child %s of a v0.1.0 session keeps its shape", child)
				} else {
					require.Empty(t, upserts(t, h), "child %s upserted", child)
				}
			}
		}
	}
}

// executionsOf returns the histories of a workflow's executions, first to
// latest, following its continue-as-new chain.
func executionsOf(t *testing.T, ctx context.Context, tc sdkclient.Client, workflowID string) [][]*historypb.HistoryEvent {
	t.Helper()
	d, err := tc.DescribeWorkflowExecution(ctx, workflowID, "")
	require.NoError(t, err)
	var out [][]*historypb.HistoryEvent
	for execution := d.GetWorkflowExecutionInfo().GetFirstRunId(); execution != ""; {
		var h []*historypb.HistoryEvent
		it := tc.GetWorkflowHistory(ctx, workflowID, execution, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			require.NoError(t, err)
			h = append(h, ev)
		}
		out = append(out, h)
		execution = h[len(h)-1].GetWorkflowExecutionContinuedAsNewEventAttributes().GetNewExecutionRunId()
	}
	return out
}

// upserts returns the search attributes each upsert of h set, decoded.
func upserts(t *testing.T, h []*historypb.HistoryEvent) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, ev := range h {
		a := ev.GetUpsertWorkflowSearchAttributesEventAttributes()
		if a == nil {
			continue
		}
		set := map[string]any{}
		for name, p := range a.GetSearchAttributes().GetIndexedFields() {
			var v any
			require.NoError(t, converter.GetDefaultDataConverter().FromPayload(p, &v))
			set[name] = v
		}
		out = append(out, set)
	}
	return out
}
