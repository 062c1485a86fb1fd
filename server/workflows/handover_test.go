package workflows_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/carry"
)

// memSegments is a content store for event segments that keeps them in a
// map, keyed by the hash of their JSON as the real store does.
type memSegments struct {
	mu   sync.Mutex
	segs map[string][]keel.Envelope
}

func (m *memSegments) StoreSegment(_ context.Context, evs []keel.Envelope) (string, int, error) {
	b, err := json.Marshal(evs)
	if err != nil {
		return "", 0, err
	}
	sum := sha256.Sum256(b)
	key := "sha256:" + hex.EncodeToString(sum[:])
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.segs == nil {
		m.segs = map[string][]keel.Envelope{}
	}
	m.segs[key] = evs
	return key, len(b), nil
}

// napThen is a script whose first turn sleeps a minute (a durable timer),
// so a test's callbacks find the first run active, then plays turns.
func napThen(turns ...string) string {
	return `{"turns":[{"tool_calls":[{"id":"nap","name":"sleep","arguments":{"seconds":60}}]},` +
		strings.Join(turns, ",") + `]}`
}

// napConfig offers the sleep tool.
var napConfig = api.RunConfig{Tools: []string{"sleep"}}

// newSessionEnv returns a test environment for Session workflows whose
// workers store segments in segs.
func newSessionEnv(t *testing.T, script string, segs *memSegments) *runEnv {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	e := newEnvOf(t, &suite, scriptedProvider(t, script))
	e.acts.Segments = segs
	return e
}

// send delivers a "send" update and records its answer.
func (e *runEnv) send(t testing.TB, id string, req api.SendRequest, out *api.SendResult) {
	e.UpdateWorkflow(api.UpdateSend, id, &testsuite.TestUpdateCallback{
		OnReject: func(err error) { t.Errorf("send %s rejected: %v", id, err) },
		OnAccept: func() {},
		OnComplete: func(v any, err error) {
			require.NoError(t, err, "send %s", id)
			*out = v.(api.SendResult)
		},
	}, req)
}

// continuedAs returns the input the workflow continued as new with.
func continuedAs(t testing.TB, e *runEnv) carry.SessionInput {
	t.Helper()
	require.True(t, e.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(e.GetWorkflowError(), &can), "the session continued as new: %v", e.GetWorkflowError())
	require.Equal(t, api.SessionWorkflowName, can.WorkflowType.Name)
	var in carry.SessionInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &in))
	return in
}

// handOverOnce runs a session that is past its limits from the start: a
// first prompt ("hello") whose run plays script, a second one ("and then")
// queued while it runs. It returns the input the session continued as new
// with and the answers of both sends.
func handOverOnce(t *testing.T, script string, segs *memSegments) (in carry.SessionInput, first, queued api.SendResult) {
	t.Helper()
	e := newSessionEnv(t, script, segs)
	e.RegisterDelayedCallback(func() { e.send(t, "first", api.SendRequest{Prompt: "hello"}, &first) }, 0)
	e.RegisterDelayedCallback(func() {
		e.send(t, "queued", api.SendRequest{Prompt: "and then", IfActive: api.IfActiveQueue}, &queued)
	}, time.Second)
	e.ExecuteWorkflow(api.SessionWorkflowName, carry.SessionInput{Shape: api.ShapeLean, SessionID: "s1", Config: napConfig,
		HandOver: api.HandOverLimits{TailBytes: 1}})
	return continuedAs(t, e), first, queued
}

// A session hands over after each run: everything it carries is checked
// field by field, the prompt queued during that run is carried (not lost,
// not run twice), and the events, past the session's tail limit, move to
// the content store as one segment.
func TestSessionHandOverCarriesState(t *testing.T) {
	segs := &memSegments{}
	in, first, queued := handOverOnce(t, napThen(`{"text":["one"],"usage":{"input_tokens":5,"output_tokens":2}}`), segs)
	require.NotEmpty(t, first.Execution)
	first.Execution = ""
	require.Equal(t, api.SendResult{RunID: "s1/run-1", Number: 1, Revision: 0, BaseSeq: 0}, first)
	require.Equal(t, api.SendResult{RunID: "s1/run-2", Number: 2, Queued: true}, queued)

	require.Equal(t, "s1", in.SessionID)
	require.Equal(t, api.HandOverLimits{TailBytes: 1}, in.HandOver, "the limits travel on")
	c := in.Carry
	require.NotNil(t, c)
	require.Equal(t, int64(1), c.Revision)
	require.Equal(t, 1, c.Runs)
	require.Equal(t, 1, c.HandOvers)
	require.Equal(t, keel.StateCompleted, c.State)
	require.False(t, c.Shutdown)
	require.NotNil(t, c.Last)
	require.Equal(t, keel.StatusCompleted, c.Last.Status)
	require.Equal(t, "one", c.Last.Text)
	require.Equal(t, keel.Usage{InputTokens: 5, OutputTokens: 2, Requests: 2}, c.Usage, "two model turns")
	require.Len(t, c.Transcript, 4, "prompt, call, result, answer")
	require.Equal(t, keel.UserMessage("hello"), c.Transcript[0])
	require.Equal(t, keel.Message{Role: keel.RoleAssistant, Content: "one"}, c.Transcript[3])
	require.Equal(t, []api.SendRequest{{Prompt: "and then", IfActive: api.IfActiveQueue}}, c.Queue)
	require.Empty(t, c.Tail, "the events moved to the store")
	require.Len(t, c.Segments, 1)
	seg := c.Segments[0]
	require.Equal(t, int64(1), seg.First)
	require.Equal(t, c.Seq, seg.Last)
	stored := segs.segs[seg.Key]
	checkLog(t, 0, stored)
	require.Equal(t, c.Seq, stored[len(stored)-1].Seq)
}

// The next execution takes over where the last one stopped: the carried
// prompt runs as run 2 numbered after the carried sequence, and the events
// query answers for the stored part with the segment that holds it.
func TestSessionResumesFromCarry(t *testing.T) {
	segs := &memSegments{}
	in, _, _ := handOverOnce(t, napThen(`{"text":["one"]}`, `{"text":["two"]}`), segs)
	carried := in.Carry.Seq

	// The second execution runs run 2 and moves on, its events kept in
	// memory under the default tail limit; the third, idle, is read when
	// the test environment's clock passes the check below.
	in.HandOver = api.HandOverLimits{}
	e := newSessionEnv(t, napThen(`{"text":["one"]}`, `{"text":["two"]}`), segs)
	e.ExecuteWorkflow(api.SessionWorkflowName, in)
	in = continuedAs(t, e)
	e = newSessionEnv(t, napThen(`{"text":["one"]}`, `{"text":["two"]}`), segs)
	var state api.SessionStatus
	var stored, tail api.EventsPage
	e.RegisterDelayedCallback(func() {
		v, err := e.QueryWorkflow(api.QueryState)
		require.NoError(t, err)
		require.NoError(t, v.Get(&state))
		v, err = e.QueryWorkflow(api.QueryEvents, api.EventsQuery{After: 0})
		require.NoError(t, err)
		require.NoError(t, v.Get(&stored))
		v, err = e.QueryWorkflow(api.QueryEvents, api.EventsQuery{After: carried})
		require.NoError(t, err)
		require.NoError(t, v.Get(&tail))
		e.CancelWorkflow()
	}, time.Hour)
	e.ExecuteWorkflow(api.SessionWorkflowName, in)

	require.Equal(t, 2, state.Runs)
	require.Equal(t, int64(2), state.Revision)
	require.Equal(t, 2, state.HandOvers)
	require.Equal(t, keel.StateCompleted, state.State)
	require.Equal(t, "two", state.Last.Text)
	require.Equal(t, "s1/run-2", state.Last.RunID)

	require.NotNil(t, stored.Segment, "events 1..%d are in the store", carried)
	require.Equal(t, in.Carry.Segments[0], *stored.Segment)
	require.Empty(t, stored.Events)
	require.True(t, stored.More)
	require.Equal(t, state.LastSeq, stored.Snapshot)

	require.Nil(t, tail.Segment)
	checkLog(t, carried, tail.Events)
	require.Equal(t, "s1/run-2", tail.Events[0].RunID)
	require.Equal(t, state.LastSeq, tail.Events[len(tail.Events)-1].Seq)
}

// A shutdown signalled while a run is active is carried: the next
// execution refuses prompts, and the queued prompt is dropped with it.
func TestSessionHandOverCarriesShutdown(t *testing.T) {
	e := newSessionEnv(t, napThen(`{"text":["one"]}`), &memSegments{})
	var first, queued api.SendResult
	e.RegisterDelayedCallback(func() { e.send(t, "first", api.SendRequest{Prompt: "hello"}, &first) }, 0)
	e.RegisterDelayedCallback(func() {
		e.send(t, "queued", api.SendRequest{Prompt: "later", IfActive: api.IfActiveQueue}, &queued)
		e.SignalWorkflow(api.SignalShutdown, nil)
	}, time.Second)
	e.ExecuteWorkflow(api.SessionWorkflowName, carry.SessionInput{Shape: api.ShapeLean, SessionID: "s1", Config: napConfig})
	c := continuedAs(t, e).Carry
	require.True(t, c.Shutdown)
	require.Empty(t, c.Queue)
	require.Equal(t, 1, c.Runs)
	require.NotNil(t, c.Last)
	require.Equal(t, keel.StatusCancelled, c.Last.Status, "the shutdown cancelled run 1")
}

// Without a content store the events travel in the carried state: the
// session still hands over and loses nothing.
func TestSessionHandOverWithoutStoreCarriesEvents(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	e := newEnvOf(t, &suite, scriptedProvider(t, napThen(`{"text":["one"]}`)))
	var first api.SendResult
	e.RegisterDelayedCallback(func() { e.send(t, "first", api.SendRequest{Prompt: "hello"}, &first) }, 0)
	e.ExecuteWorkflow(api.SessionWorkflowName, carry.SessionInput{Shape: api.ShapeLean, SessionID: "s1", Config: napConfig,
		HandOver: api.HandOverLimits{TailBytes: 1}})
	c := continuedAs(t, e).Carry
	require.Empty(t, c.Segments)
	checkLog(t, 0, c.Tail)
	require.Equal(t, c.Seq, c.Tail[len(c.Tail)-1].Seq)
}

// docs/contract.md §13: a send that comes after a shutdown signal to an
// idle execution is refused, and no run starts. (In one workflow task a
// real worker validates the send before the signal's goroutine runs, so
// the session also looks at the signal waiting in its channel; the test
// environment runs the goroutine first, and e2e TestShutdown meets that
// order.)
func TestSendAfterShutdownIsRefused(t *testing.T) {
	in, _, _ := handOverOnce(t, napThen(`{"text":["one"]}`, `{"text":["two"]}`), &memSegments{})
	in.Carry.Queue = nil
	e := newSessionEnv(t, napThen(`{"text":["one"]}`, `{"text":["two"]}`), &memSegments{})
	u := newUpdates(t, e)
	e.RegisterDelayedCallback(func() {
		e.SignalWorkflow(api.SignalShutdown, nil)
		u.send(api.UpdateSend, "after", api.SendRequest{Prompt: "after the shutdown"})
	}, time.Minute)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(api.SignalMove, nil) }, time.Hour)
	e.ExecuteWorkflow(api.SessionWorkflowName, in)
	c := continuedAs(t, e).Carry
	require.Empty(t, u.accepted)
	require.ErrorIs(t, u.rejected["after"], keel.ErrRuntimeShutdown, "%v", u.rejected["after"])
	require.True(t, c.Shutdown)
	require.Equal(t, 1, c.Runs, "no run started after the shutdown")
}
