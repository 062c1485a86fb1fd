package e2e_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/server/common/dynamicconfig"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/devserver"
)

// A session whose workflow an operator (or a Temporal limit) terminated
// says so: its state is terminated with the reason, a new prompt is
// refused with what happened and what to do, and its events and
// transcript stay readable. A run whose execution is gone (past
// retention) still has its outcome, read from the session's log.
func TestTerminatedSessionStaysReadable(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	// A deletion waits until the transfer and visibility queues have
	// saved their progress past the execution's close, every 30 s by
	// default; every second here.
	c, _ := readStack(t, devserver.Config{DynamicConfig: map[string]any{
		dynamicconfig.TransferProcessorUpdateAckInterval.Key().String():   time.Second,
		dynamicconfig.VisibilityProcessorUpdateAckInterval.Key().String(): time.Second,
	}})
	sess := c.Session("terminated")
	for _, p := range []string{"one", "two"} {
		run, err := sess.Send(ctx, p)
		require.NoError(t, err)
		_, err = run.Outcome(ctx)
		require.NoError(t, err)
	}
	before, err := sess.EventsAfter(ctx, 0)
	require.NoError(t, err)
	requireSessionLog(t, before)

	// Run 1 ran in the session's own workflow (an inline session): there
	// is no Run workflow, and the session's execution that ran it
	// continued as new once it committed. That execution is deleted, as
	// retention would.
	tc := c.Temporal()
	_, err = tc.DescribeWorkflowExecution(ctx, keel.RunID(sess.ID(), 1), "")
	var nf *serviceerror.NotFound
	require.ErrorAs(t, err, &nf, "no Run workflow")
	execution := runExecution(t, ctx, tc, sess.ID(), 1)
	_, err = tc.WorkflowService().DeleteWorkflowExecution(ctx, &workflowservice.DeleteWorkflowExecutionRequest{
		Namespace: "default", WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: sess.ID(), RunId: execution}})
	require.NoError(t, err)
	// Deletion is a server task that nothing announces, so its end is
	// polled for.
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		_, err := tc.DescribeWorkflowExecution(ctx, sess.ID(), execution)
		if errors.As(err, &nf) {
			break
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal("the execution of run 1 was not deleted")
		}
	}
	out, err := sess.Run(1).Outcome(ctx)
	require.NoError(t, err)
	require.Equal(t, keel.StatusCompleted, out.Status)
	require.Equal(t, "read it", out.Text)

	require.NoError(t, tc.TerminateWorkflow(ctx, sess.ID(), "", "operator: disk full"))
	st, err := sess.State(ctx)
	require.NoError(t, err)
	require.Equal(t, keel.StateTerminated, st.State)
	require.NotNil(t, st.Closed)
	require.Equal(t, "Terminated", st.Closed.Status)
	require.Equal(t, "operator: disk full", st.Closed.Reason)
	require.False(t, st.Closed.At.IsZero())
	require.Equal(t, 2, st.Runs, "the state it had is kept")
	require.Nil(t, st.ActiveRun)

	_, err = sess.Send(ctx, "three")
	require.ErrorIs(t, err, keel.ErrNotAccepting)
	require.Contains(t, err.Error(), "terminated")
	require.Contains(t, err.Error(), "operator: disk full")
	require.True(t, strings.Contains(err.Error(), "new session"), err.Error())

	after, err := sess.EventsAfter(ctx, 0)
	require.NoError(t, err)
	requireSameEvents(t, before, after)
	page, err := sess.History(ctx, 0, 0)
	require.NoError(t, err)
	require.Equal(t, 8, page.Total, "two runs of prompt, call, result, answer")
}
