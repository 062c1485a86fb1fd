package client_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
)

const script = `{"chunk_delay":"5ms","turns":[
  {"text":["Let me ", "echo."],"tool_calls":[{"id":"c1","name":"echo","arguments":{"prompt":"x"}}],
   "usage":{"input_tokens":10,"output_tokens":5}},
  {"text":["All ", "done."],"usage":{"input_tokens":20,"output_tokens":2}},
  {"text":["Second ", "run."],"usage":{"input_tokens":30,"output_tokens":2}}
]}`

func TestSendFollowOutcome(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t)
	model := shared.book.Add(t, t.Name(), script)

	sess := c.Session("e2e-1")
	run, err := sess.Send(ctx, "list things", client.WithConfig(api.RunConfig{Model: model, Tools: []string{"echo"}}))
	require.NoError(t, err)
	require.Equal(t, "e2e-1/run-1", run.ID)
	require.Equal(t, int64(0), run.BaseSeq)

	var durable []keel.Envelope
	var text string
	for ev, err := range run.Events(ctx) {
		require.NoError(t, err)
		if ev.Durable() {
			durable = append(durable, ev)
			continue
		}
		if d, ok := mustEvent(t, ev).(keel.TextDelta); ok {
			text += d.Text
		}
	}
	require.Equal(t, "Let me echo.All done.", text)
	require.NotEmpty(t, durable)
	for i, ev := range durable {
		require.Equal(t, int64(i+1), ev.Seq)
	}
	require.Equal(t, keel.TypeRunCompleted, durable[len(durable)-1].Type)

	out, err := run.Outcome(ctx)
	require.NoError(t, err)
	require.Equal(t, "All done.", out.Text)

	// The session committed the run: state, history and the log agree.
	st, err := sess.State(ctx)
	require.NoError(t, err)
	require.Equal(t, keel.StateCompleted, st.State)
	require.Equal(t, int64(1), st.Revision)
	require.Equal(t, durable[len(durable)-1].Seq, st.LastSeq)
	hist, err := sess.History(ctx, 0, 0)
	require.NoError(t, err)
	require.Equal(t, 4, hist.Total)
	all, err := sess.EventsAfter(ctx, 0)
	require.NoError(t, err)
	require.Len(t, all, len(durable))

	// A second run continues the sequence and the transcript.
	run2, err := sess.Send(ctx, "again", client.WithConfig(api.RunConfig{Model: model}))
	require.NoError(t, err)
	require.Equal(t, 2, run2.Number)
	require.Equal(t, st.LastSeq, run2.BaseSeq)
	out2, err := run2.Outcome(ctx)
	require.NoError(t, err)
	require.Equal(t, "Second run.", out2.Text)
	require.Equal(t, int64(2), out2.Revision)
}

func TestSendWhileActiveIsRejected(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t)
	sess := c.Session("busy")
	run, err := sess.Send(ctx, "sleep", cfg(t, `{"turns":[
	  {"tool_calls":[{"id":"z","name":"sleep","arguments":{"seconds":3600}}]},{"text":["woke"]}]}`, "sleep"))
	require.NoError(t, err)
	_, err = sess.Send(ctx, "another")
	require.ErrorIs(t, err, keel.ErrRunActive)
	var ke *keel.Error
	require.True(t, errors.As(err, &ke))
	require.Contains(t, ke.Message, "busy/run-1")

	require.NoError(t, run.Cancel(ctx))
	_, err = run.Outcome(ctx)
	require.ErrorIs(t, err, keel.ErrCancelled)
}

func TestBadInputIsTyped(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t)
	_, err := c.Session("bad id!").Send(ctx, "hi")
	require.ErrorIs(t, err, keel.ErrInvalidInput)
	_, err = c.Session("empty-prompt").Send(ctx, "")
	require.ErrorIs(t, err, keel.ErrInvalidInput)
	_, err = c.Session("never-created").State(ctx)
	require.ErrorIs(t, err, keel.ErrNotFound)
}

func mustEvent(t *testing.T, env keel.Envelope) keel.Event {
	t.Helper()
	ev, err := env.Event()
	require.NoError(t, err)
	return ev
}

// A session starts with api.SessionPriority, and its inline run executes
// in the session's workflow, with no workflow of its own.
func TestSessionPriorityAndNoRunWorkflow(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t)
	model := shared.book.Add(t, t.Name(), `{"turns":[{"text":["ok"]}]}`)
	sess := c.Session("e2e-priority")
	run, err := sess.Send(ctx, "hi", client.WithConfig(api.RunConfig{Model: model, Tools: []string{}}))
	require.NoError(t, err)
	_, err = run.Outcome(ctx)
	require.NoError(t, err)
	d, err := c.Temporal().DescribeWorkflowExecution(ctx, sess.ID(), "")
	require.NoError(t, err)
	require.Equal(t, int32(api.SessionPriority), d.GetWorkflowExecutionInfo().GetPriority().GetPriorityKey())
	// The run executed in the session's workflow: there is no other.
	_, err = c.Temporal().DescribeWorkflowExecution(ctx, run.ID, "")
	require.ErrorAs(t, err, new(*serviceerror.NotFound))
}
