package workflows_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/carry"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/provider"
	"github.com/keelrun/keel/server/provider/scripted"
	"github.com/keelrun/keel/server/tool"
	"github.com/keelrun/keel/server/worker"
)

// TestMain names the test binary's build for the Temporal test
// environment, which otherwise hashes the whole binary (over 100 MB with
// -race) when the first activity is scheduled, inside workflow code: on a
// loaded machine that passed the SDK's 1 s deadlock detector and failed
// whichever test ran first (TMPRL1101).
func TestMain(m *testing.M) {
	sdkworker.SetBinaryChecksum("keel-workflows-test")
	os.Exit(m.Run())
}

// scriptModels resolves every spec to one script.
type scriptModels struct{ p provider.Provider }

func (m scriptModels) Resolve(spec string) (provider.Provider, string, error) {
	return m.p, "test-model", nil
}

// testTools are tools with observable behaviour for workflow tests, plus
// extra ones a test brings.
func testTools(t testing.TB, extra ...tool.Tool) *tool.Registry {
	type echoArgs struct {
		Text string `json:"text"`
	}
	reg, err := tool.NewRegistry(
		tool.Sleep(),
		tool.New("echo", "Echo the text.", func(ctx context.Context, a echoArgs) (string, error) {
			return "echo: " + a.Text, nil
		}),
		tool.New("fail", "Always fails.", func(ctx context.Context, a echoArgs) (string, error) {
			return "", tool.Failf("it broke: %s", a.Text)
		}),
		tool.Func("boom", "Panics.", json.RawMessage(`{"type":"object"}`),
			func(ctx context.Context, _ json.RawMessage) (tool.Result, error) { panic("boom") }),
	)
	require.NoError(t, err)
	for _, x := range extra {
		require.NoError(t, reg.Register(x))
	}
	return reg
}

type runEnv struct {
	*testsuite.TestWorkflowEnvironment
	live *live.Memory
	acts *activities.Activities
}

// newRunEnv returns a test environment running script with the test
// tools, whose worker has a content store for the session's events.
func newRunEnv(t *testing.T, script string, extra ...tool.Tool) *runEnv {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	e := newEnvOf(t, &suite, scripted.New(parseScript(t, script)), extra...)
	e.acts.Segments = &memSegments{}
	return e
}

// scriptedProvider returns the scripted provider playing script.
func scriptedProvider(t *testing.T, script string) provider.Provider {
	t.Helper()
	return scripted.New(parseScript(t, script))
}

func parseScript(t *testing.T, script string) *scripted.Script {
	t.Helper()
	s, err := scripted.Parse([]byte(script))
	require.NoError(t, err)
	return s
}

// newEnvOf returns an environment of suite whose every model is p, with
// the test tools and an in-process live channel.
func newEnvOf(t testing.TB, suite *testsuite.WorkflowTestSuite, p provider.Provider, extra ...tool.Tool) *runEnv {
	t.Helper()
	env := suite.NewTestWorkflowEnvironment()
	mem := live.NewMemory()
	t.Cleanup(func() { _ = mem.Close() })
	acts := &activities.Activities{Models: scriptModels{p}, Tools: testTools(t, extra...), Live: mem}
	worker.Register(env, acts)
	return &runEnv{TestWorkflowEnvironment: env, live: mem, acts: acts}
}

// sessionInput is the input keel's clients start a session with
// (client/session.go, update-with-start of the send update): the session's
// defaults. Every test session starts from it.
func sessionInput(id string, defaults api.RunConfig) carry.SessionInput {
	return carry.SessionInput{Shape: api.ShapeLean, SessionID: id, Config: defaults}
}

// sessionSend is a prompt a test sends to a session, with its run config,
// and what the session holds from its earlier runs.
type sessionSend struct {
	Prompt string
	Config api.RunConfig
	// Carry is the state an earlier execution handed over (transcript,
	// revision, sequence, spend, delegations); nil for a new session.
	Carry *carry.SessionCarry
}

// promptOf is a prompt to the scripted test model offering tools.
func promptOf(prompt string, tools ...string) sessionSend {
	return sessionSend{Prompt: prompt, Config: api.RunConfig{Model: "scripted:test", Tools: tools}}
}

// sessionRun is what one run of a session left: the send's answer, the
// run's outcome, events and messages, and the state the session handed
// over after it.
type sessionRun struct {
	Sent    api.SendResult
	Outcome keel.Outcome
	Events  []keel.Envelope
	// Messages are the run's own messages, or the whole transcript when
	// the run replaced it (Replaced: it compacted).
	Messages []keel.Message
	Replaced bool
	Carry    *carry.SessionCarry
}

// execSession runs in as users do: a session started as clients start
// one, the send update at time 0 (answered once the run started,
// docs/contract.md §11.1), and the session's own commands from the test's
// callbacks. It returns the run once the session committed it and
// continued as new, having checked the run's log (checkLog) and the
// commit (§3.2, §10.1).
func (e *runEnv) execSession(t testing.TB, in sessionSend) sessionRun {
	t.Helper()
	var sent api.SendResult
	e.RegisterDelayedCallback(func() {
		e.send(t, "send", api.SendRequest{Prompt: in.Prompt, Config: &in.Config}, &sent)
	}, 0)
	start := sessionInput("s1", api.RunConfig{})
	start.Carry = in.Carry
	e.ExecuteWorkflow(api.SessionWorkflowName, start)
	c := continuedAs(t, e).Carry

	var before carry.SessionCarry
	if in.Carry != nil {
		before = *in.Carry
	}
	require.NotEmpty(t, sent.Execution)
	require.Equal(t, keel.RunID("s1", before.Runs+1), sent.RunID, "the send answered with the run it started")
	require.Equal(t, before.Runs+1, sent.Number)
	require.Equal(t, before.Revision, sent.Revision)
	require.Equal(t, before.Seq, sent.BaseSeq)
	require.False(t, sent.Queued)
	require.Equal(t, before.Runs+1, c.Runs)
	require.NotNil(t, c.Last)
	require.Equal(t, sent.RunID, c.Last.RunID, "the session committed the run")
	var evs []keel.Envelope
	for _, ev := range e.storedEvents(t, c) {
		if ev.Seq > before.Seq {
			evs = append(evs, ev)
		}
	}
	checkLog(t, before.Seq, evs)
	require.Equal(t, c.Last.Seq, evs[len(evs)-1].Seq, "the outcome names the terminal event")
	require.Equal(t, c.Last.Revision, c.Revision, "the run's revision is the session's")
	require.Equal(t, before.Usage.Add(c.Last.UsageTotal), c.Usage, "what the run spent counts as the session's")
	require.Equal(t, stateAfter[c.Last.Status], c.State, "the session's state after a %s run", c.Last.Status)

	run := sessionRun{Sent: sent, Outcome: *c.Last, Events: evs, Carry: c}
	mark := c.Marks[len(c.Marks)-1]
	require.Equal(t, before.Runs+1, mark.Run)
	run.Replaced = mark.Start < 0
	run.Messages = c.Transcript[max(mark.Start, 0):mark.End]
	return run
}

// stateAfter is a session's state once it committed a run that ended so.
var stateAfter = map[keel.RunStatus]keel.SessionState{keel.StatusCompleted: keel.StateCompleted,
	keel.StatusFailed: keel.StateFailed, keel.StatusCancelled: keel.StateIdle}

// failure is the error a run failed with; the test stops if it has none.
func failure(t testing.TB, o keel.Outcome) *keel.Error {
	t.Helper()
	require.NotNil(t, o.Error, "the run ended %s, with no error", o.Status)
	return o.Error
}

// closeAfterTurns closes release once n model turns have completed: a
// detachedJob waiting for it finishes while the run goes on, with no
// wall-clock wait (while an activity runs, the test environment's clock
// follows the wall clock).
func (e *runEnv) closeAfterTurns(release chan struct{}, n int) {
	var turns atomic.Int32
	e.SetOnActivityCompletedListener(func(info *activity.Info, _ converter.EncodedValue, _ error) {
		if info.ActivityType.Name == activities.ModelTurnName && turns.Add(1) == int32(n) {
			close(release)
		}
	})
}

// detachedJob is a detached tool whose call finishes, with output, once
// release is closed.
func detachedJob(name, output string, release <-chan struct{}) tool.Tool {
	type noArgs struct{}
	return tool.New(name, "Detached; finishes when released.", func(ctx context.Context, _ noArgs) (string, error) {
		select {
		case <-release:
			return output, nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}, tool.Detached())
}

// storedEvents is the session's log as c hands it over: the segments in
// the test's content store, then the tail.
func (e *runEnv) storedEvents(t testing.TB, c *carry.SessionCarry) []keel.Envelope {
	t.Helper()
	var evs []keel.Envelope
	for _, seg := range c.Segments {
		store, ok := e.acts.Segments.(*memSegments)
		require.True(t, ok, "segments without a test store")
		store.mu.Lock()
		evs = append(evs, store.segs[seg.Key]...)
		store.mu.Unlock()
	}
	return append(evs, c.Tail...)
}

// checkLog asserts the invariants every run's log keeps: dense sequence
// from base+1, run.started first, exactly one terminal event, last.
func checkLog(t testing.TB, base int64, evs []keel.Envelope) {
	t.Helper()
	require.NotEmpty(t, evs)
	for i, ev := range evs {
		require.Equal(t, base+int64(i)+1, ev.Seq, "event %d (%s) out of sequence", i, ev.Type)
	}
	require.Equal(t, keel.TypeRunStarted, evs[0].Type)
	terminals := 0
	for _, ev := range evs {
		if ev.Terminal() {
			terminals++
		}
	}
	require.Equal(t, 1, terminals, "terminal events in %v", types(evs))
	require.True(t, evs[len(evs)-1].Terminal(), "last event %s is not terminal", evs[len(evs)-1].Type)
}

func types(evs []keel.Envelope) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Type
	}
	return out
}

// decode returns the typed events of a log.
func decode(t *testing.T, evs []keel.Envelope) []keel.Event {
	t.Helper()
	out := make([]keel.Event, len(evs))
	for i, env := range evs {
		ev, err := env.Event()
		require.NoError(t, err)
		out[i] = ev
	}
	return out
}

// find returns the events of type E in order.
func find[E keel.Event](t *testing.T, evs []keel.Envelope) []E {
	var out []E
	for _, ev := range decode(t, evs) {
		if e, ok := ev.(E); ok {
			out = append(out, e)
		}
	}
	return out
}

// at returns the workflow time of the first event of type typ after index
// from.
func at(evs []keel.Envelope, typ string, from int) (time.Time, int) {
	for i := from; i < len(evs); i++ {
		if evs[i].Type == typ {
			return evs[i].At, i
		}
	}
	panic(fmt.Sprintf("no %s after %d", typ, from))
}
