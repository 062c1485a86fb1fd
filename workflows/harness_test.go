package workflows_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/activities"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/provider"
	"github.com/keelrun/keel/provider/scripted"
	"github.com/keelrun/keel/tool"
	"github.com/keelrun/keel/worker"
)

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

// newRunEnv returns a test environment running script with the test tools.
func newRunEnv(t *testing.T, script string, extra ...tool.Tool) *runEnv {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	return newEnvOf(t, &suite, scripted.New(parseScript(t, script)), extra...)
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

// runInput is a Run workflow input for tests.
func runInput(prompt string, tools ...string) api.RunInput {
	return api.RunInput{
		SessionID: "s1", RunID: keel.RunID("s1", 1), Number: 1, Revision: 0, BaseSeq: 0,
		Prompt: prompt, Config: api.RunConfig{Model: "scripted:test", Tools: tools},
	}
}

// execRun runs a Run workflow to its end and returns its result.
func (e *runEnv) execRun(t *testing.T, in api.RunInput) api.RunResult {
	t.Helper()
	e.ExecuteWorkflow(api.RunWorkflowName, in)
	require.True(t, e.IsWorkflowCompleted())
	require.NoError(t, e.GetWorkflowError())
	var res api.RunResult
	require.NoError(t, e.GetWorkflowResult(&res))
	checkLog(t, in.BaseSeq, res.Events)
	return res
}

// checkLog asserts the invariants every run's log keeps: dense sequence
// from base+1, run.started first, exactly one terminal event, last.
func checkLog(t *testing.T, base int64, evs []keel.Envelope) {
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
