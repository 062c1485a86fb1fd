package workflows_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/carry"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/worker"
	"github.com/keelrun/keel/server/workflows"
)

// okScript answers every model turn with a text.
const okScript = `{"repeat":true,"turns":[{"text":["ok"]}]}`

// turnSeen is what a model turn was asked with.
type turnSeen struct {
	run, model string
	tools      []string
}

// execution is one inline execution of a session under test.
type execution struct {
	*runEnv
	turns []turnSeen
}

// newExecution returns an execution whose model plays script, whose
// worker applies rules (nil: none), and which records each model turn's
// model and tools.
func newExecution(t *testing.T, script string, rules *workflows.Rules) *execution {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	mem := live.NewMemory()
	t.Cleanup(func() { _ = mem.Close() })
	acts := &activities.Activities{Models: scriptModels{scriptedProvider(t, script)}, Tools: testTools(t), Live: mem,
		Segments: &memSegments{}}
	if rules != nil {
		worker.RegisterWithRules(env, acts, *rules)
	} else {
		worker.Register(env, acts)
	}
	x := &execution{runEnv: &runEnv{TestWorkflowEnvironment: env, live: mem, acts: acts}}
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, args converter.EncodedValues) {
		if info.ActivityType.Name != activities.ModelTurnName {
			return
		}
		var in activities.ModelTurnInput
		require.NoError(t, args.Get(&in))
		x.turns = append(x.turns, turnSeen{run: in.RunID, model: in.Model, tools: in.Tools})
	})
	return x
}

// sendAll runs the execution from in with the sends given, the first at
// once and each other a second after the one before, and returns what it
// continued as new with.
func (x *execution) sendAll(t *testing.T, in carry.SessionInput, reqs ...api.SendRequest) carry.SessionInput {
	t.Helper()
	for i, req := range reqs {
		var res api.SendResult
		x.RegisterDelayedCallback(func() { x.send(t, "send-"+req.Prompt, req, &res) }, time.Duration(i)*time.Second)
	}
	x.ExecuteWorkflow(api.SessionWorkflowName, in)
	return continuedAs(t, x.runEnv)
}

// modelsOf returns the model of each run, in the order the runs made
// their first model turns.
func modelsOf(turns []turnSeen) []string {
	var out []string
	seen := map[string]bool{}
	for _, turn := range turns {
		if !seen[turn.run] {
			seen[turn.run] = true
			out = append(out, turn.model)
		}
	}
	return out
}

// sessionChain runs an inline session execution by execution: each call
// runs one execution from the input the previous one continued as new
// with.
type sessionChain struct {
	t     *testing.T
	in    carry.SessionInput
	turns []turnSeen
}

func newChain(t *testing.T, defaults api.RunConfig) *sessionChain {
	return &sessionChain{t: t, in: sessionInput("s1", defaults)}
}

// next runs the next execution with the sends given and returns the
// model turns its run made.
func (c *sessionChain) next(reqs ...api.SendRequest) []turnSeen {
	c.t.Helper()
	return c.nextPlaying(okScript, reqs...)
}

// nextPlaying is next with a model playing script.
func (c *sessionChain) nextPlaying(script string, reqs ...api.SendRequest) []turnSeen {
	c.t.Helper()
	x := newExecution(c.t, script, nil)
	c.in = x.sendAll(c.t, c.in, reqs...)
	c.turns = append(c.turns, x.turns...)
	return x.turns
}

// docs/contract.md §11.6: a send's run config applies to its run only. A
// run with a model, tools and a system prompt of its own is followed by a
// plain send, which runs under the session's defaults again; the defaults
// the session hands to its next execution never changed.
func TestSendConfigAppliesToItsRunOnly(t *testing.T) {
	defaults := api.RunConfig{Model: "scripted:base", Tools: []string{"echo"}}
	c := newChain(t, defaults)

	got := c.next(api.SendRequest{Prompt: "one", Config: &api.RunConfig{
		Model: "scripted:override", Tools: []string{"sleep"}, System: "be brief", MaxSteps: 3}})
	require.Equal(t, []turnSeen{{run: "s1/run-1", model: "scripted:override", tools: []string{"sleep"}}}, got)
	require.Equal(t, defaults, c.in.Config, "a send without set_default changed the session's defaults")

	got = c.next(api.SendRequest{Prompt: "two"})
	require.Equal(t, []turnSeen{{run: "s1/run-2", model: "scripted:base", tools: []string{"echo"}}}, got)
	started := find[keel.RunStarted](t, c.in.Carry.Tail)
	require.Len(t, started, 2)
	require.Equal(t, "scripted:base", started[1].Model, "run.started names the model the run used")
}

// docs/contract.md §11.6: a send with set_default makes its config the
// session's default: its run and the plain sends after it use it, in
// later executions too; the fields it leaves unset keep their defaults.
func TestSetDefaultChangesTheSessionsDefaults(t *testing.T) {
	c := newChain(t, api.RunConfig{Model: "scripted:base", Tools: []string{"echo"}, System: "kept"})

	got := c.next(api.SendRequest{Prompt: "one", SetDefault: true,
		Config: &api.RunConfig{Model: "scripted:new"}})
	require.Equal(t, []turnSeen{{run: "s1/run-1", model: "scripted:new", tools: []string{"echo"}}}, got)
	require.Equal(t, api.RunConfig{Model: "scripted:new", Tools: []string{"echo"}, System: "kept"}, c.in.Config)

	got = c.next(api.SendRequest{Prompt: "two"})
	require.Equal(t, []turnSeen{{run: "s1/run-2", model: "scripted:new", tools: []string{"echo"}}}, got)

	// An override after it is again for its own run only.
	got = c.next(api.SendRequest{Prompt: "three", Config: &api.RunConfig{Tools: []string{}}})
	require.Equal(t, []turnSeen{{run: "s1/run-3", model: "scripted:new"}}, got)
	got = c.next(api.SendRequest{Prompt: "four"})
	require.Equal(t, []turnSeen{{run: "s1/run-4", model: "scripted:new", tools: []string{"echo"}}}, got)
}

// docs/contract.md §11.6: a queued send with set_default changes the
// defaults when its run starts: the prompt queued ahead of it runs under
// the defaults it was sent under, the one behind it under the new ones.
func TestQueuedSetDefaultTakesEffectInQueueOrder(t *testing.T) {
	c := newChain(t, api.RunConfig{Model: "scripted:base"})
	queue := func(prompt string, cfg *api.RunConfig, set bool) api.SendRequest {
		return api.SendRequest{Prompt: prompt, IfActive: api.IfActiveQueue, Config: cfg, SetDefault: set}
	}
	// The first run naps for a minute, so the others queue behind it.
	c.nextPlaying(napThen(`{"text":["ok"]}`),
		api.SendRequest{Prompt: "first", Config: &api.RunConfig{Tools: []string{"sleep"}}},
		queue("ahead", nil, false),
		queue("setter", &api.RunConfig{Model: "scripted:new"}, true),
		queue("behind", nil, false))
	require.Len(t, c.in.Carry.Queue, 3, "the queued sends are carried")
	require.True(t, c.in.Carry.Queue[1].SetDefault, "set_default is carried with its queued send")
	require.Equal(t, "scripted:base", c.in.Config.Model, "a queued send changed the defaults before its run")
	for range 3 {
		c.next()
	}
	require.Equal(t, []string{"scripted:base", "scripted:base", "scripted:new", "scripted:new"}, modelsOf(c.turns))
	require.Equal(t, "scripted:new", c.in.Config.Model)
}

// The attack, on the defaults: a caller asks set_default with models the
// worker does not offer. Each send is refused before history with
// invalid_input and the one message of a refused model, whatever the
// spec, and the defaults stay as they were. A send is checked against the
// defaults it will run under: while the session's default is a model the
// worker no longer offers, a plain prompt is refused, and once a queued
// send will make an offered model the default, a plain prompt queued
// behind it is accepted and runs under that model. set_default without a
// config is invalid input too.
func TestSetDefaultRefusesModelsTheWorkerDoesNotOffer(t *testing.T) {
	rules := workflows.Rules{
		AdmitModel: func(spec string) bool { return spec == "scripted:ok" || spec == "scripted:also" },
		ModelOffer: func() string { return "scripted:ok, scripted:also" },
	}
	x := newExecution(t, napThen(`{"text":["ok"]}`), &rules)
	var refusals []error
	refuse := func(req api.SendRequest) {
		x.UpdateWorkflow(api.UpdateSend, "bad-"+req.Prompt, &testsuite.TestUpdateCallback{
			OnReject:   func(err error) { refusals = append(refusals, err) },
			OnAccept:   func() { t.Errorf("send %q was accepted", req.Prompt) },
			OnComplete: func(any, error) {},
		}, req)
	}
	hostile := []string{"scripted:/etc/shadow", "scripted:../x", "openai:invented", "gpt"}
	var first, setter, behind api.SendResult
	x.RegisterDelayedCallback(func() {
		for _, spec := range hostile {
			refuse(api.SendRequest{Prompt: spec, SetDefault: true, Config: &api.RunConfig{Model: spec}})
		}
		refuse(api.SendRequest{Prompt: "nothing to set", SetDefault: true})
		x.send(t, "first", api.SendRequest{Prompt: "first",
			Config: &api.RunConfig{Model: "scripted:ok", Tools: []string{"sleep"}}}, &first)
	}, 0)
	x.RegisterDelayedCallback(func() {
		refuse(api.SendRequest{Prompt: "stale", IfActive: api.IfActiveQueue})
		x.send(t, "setter", api.SendRequest{Prompt: "setter", IfActive: api.IfActiveQueue, SetDefault: true,
			Config: &api.RunConfig{Model: "scripted:also"}}, &setter)
		x.send(t, "behind", api.SendRequest{Prompt: "behind", IfActive: api.IfActiveQueue}, &behind)
	}, time.Second)
	x.ExecuteWorkflow(api.SessionWorkflowName,
		sessionInput("s1", api.RunConfig{Model: "scripted:retired"}))
	in := continuedAs(t, x.runEnv)

	require.Len(t, refusals, len(hostile)+2)
	for i, err := range refusals {
		require.Equal(t, keel.CodeInvalidInput, keelCode(err), "refusal %d: %v", i, err)
		if i == len(hostile) {
			continue // set_default without a config
		}
		var appErr *temporal.ApplicationError
		require.True(t, errors.As(err, &appErr))
		require.Equal(t, "model: not offered by this worker; it offers scripted:ok, scripted:also", appErr.Message())
	}
	require.Equal(t, []string{"scripted:ok"}, modelsOf(x.turns), "a refused send ran")
	require.Equal(t, "scripted:retired", in.Config.Model, "a refused set_default changed the defaults")
	require.Equal(t, []int{1, 2, 3}, []int{first.Number, setter.Number, behind.Number})

	// The queued runs, each in its execution.
	c := &sessionChain{t: t, in: in}
	c.next()
	c.next()
	require.Equal(t, []string{"scripted:also", "scripted:also"}, modelsOf(c.turns))
	require.Equal(t, "scripted:also", c.in.Config.Model)
}
