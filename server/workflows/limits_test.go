package workflows_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/tool"
	"github.com/keelrun/keel/server/worker"
	"github.com/keelrun/keel/server/workflows"
)

// newRulesEnv is newRunEnv with the workflows registered under rules.
func newRulesEnv(t *testing.T, script string, rules workflows.Rules, extra ...tool.Tool) *runEnv {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	mem := live.NewMemory()
	t.Cleanup(func() { _ = mem.Close() })
	acts := &activities.Activities{Models: scriptModels{scriptedProvider(t, script)}, Tools: testTools(t, extra...), Live: mem}
	worker.RegisterWithRules(env, acts, rules)
	return &runEnv{TestWorkflowEnvironment: env, live: mem, acts: acts}
}

// keelErrorOf returns the keel error an update was rejected with.
func keelErrorOf(t *testing.T, err error) *keel.Error {
	t.Helper()
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "not an ApplicationError: %v", err)
	var ke *keel.Error
	require.NoError(t, appErr.Details(&ke))
	require.Equal(t, string(ke.Code), appErr.Type())
	return ke
}

// update sends an update; a rejection is recorded in rejected (by ID), an
// acceptance in accepted.
type updates struct {
	t        *testing.T
	env      *runEnv
	rejected map[string]*keel.Error
	accepted map[string]any
}

func newUpdates(t *testing.T, env *runEnv) *updates {
	return &updates{t: t, env: env, rejected: map[string]*keel.Error{}, accepted: map[string]any{}}
}

// refusal is the error update id was refused with; the test stops if it
// was not refused.
func (u *updates) refusal(id string) *keel.Error {
	u.t.Helper()
	require.Contains(u.t, u.rejected, id, "%s was refused", id)
	return u.rejected[id]
}

func (u *updates) send(name, id string, arg any) {
	u.env.UpdateWorkflow(name, id, &testsuite.TestUpdateCallback{
		OnReject: func(err error) { u.rejected[id] = keelErrorOf(u.t, err) },
		OnAccept: func() {},
		OnComplete: func(v any, err error) {
			require.NoError(u.t, err, "update %s", id)
			u.accepted[id] = v
		},
	}, arg)
}

// The worker's limits (Rules.Limits) refuse, before history, a prompt or a
// run config over its size (keel.TooLarge, which also matches
// keel.ErrInvalidInput) and a prompt queued behind a full queue
// (keel.TooMany, retryable). A refused send uses no run number: the next
// accepted one takes the number after the last accepted, and nothing
// refused ever runs: the session carries exactly the accepted prompts on.
func TestSendLimits(t *testing.T) {
	rules := workflows.Rules{Limits: api.Limits{PromptBytes: 64, ConfigBytes: 256, QueuedPrompts: 2}}
	env := newRulesEnv(t, napThen(`{"text":["one"]}`, `{"text":["two"]}`, `{"text":["three"]}`, `{"text":["four"]}`), rules)
	u := newUpdates(t, env)
	queue := func(prompt string) api.SendRequest {
		return api.SendRequest{Prompt: prompt, IfActive: api.IfActiveQueue}
	}
	var queued api.SessionStatus
	env.RegisterDelayedCallback(func() { u.send(api.UpdateSend, "first", api.SendRequest{Prompt: "hello"}) }, 0)
	env.RegisterDelayedCallback(func() {
		u.send(api.UpdateSend, "q1", queue("second"))
		u.send(api.UpdateSend, "q2", queue("third"))
		u.send(api.UpdateSend, "q3-full", queue("one too many"))
		u.send(api.UpdateSend, "big-prompt", queue(strings.Repeat("p", 65)))
		u.send(api.UpdateSend, "big-config", api.SendRequest{Prompt: "hi", IfActive: api.IfActiveQueue,
			Config: &api.RunConfig{System: strings.Repeat("s", 300)}})
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(api.QueryState)
		require.NoError(t, err)
		require.NoError(t, v.Get(&queued))
	}, 2*time.Second)
	env.ExecuteWorkflow(api.SessionWorkflowName, sessionInput("s1", napConfig))
	carried := continuedAs(t, env)

	require.Equal(t, 2, queued.Queued, "the refused prompts were not queued")
	full := u.rejected["q3-full"]
	require.NotNil(t, full, "the third queued prompt was refused")
	require.Equal(t, keel.CodeTooMany, full.Code)
	require.True(t, full.Retryable)
	require.ErrorIs(t, full, keel.ErrTooMany)
	require.Contains(t, full.Message, "the limit is 2")
	for _, id := range []string{"big-prompt", "big-config"} {
		e := u.rejected[id]
		require.NotNil(t, e, "%s was refused", id)
		require.Equal(t, keel.CodeTooLarge, e.Code, id)
		require.ErrorIs(t, e, keel.ErrTooLarge)
		require.ErrorIs(t, e, keel.ErrInvalidInput, "an over-size value is still invalid input")
	}
	require.Contains(t, u.refusal("big-prompt").Message, "prompt is 65 bytes; the limit is 64")
	require.Len(t, u.rejected, 3)

	for id, n := range map[string]int{"first": 1, "q1": 2, "q2": 3} {
		require.Contains(t, u.accepted, id)
		require.Equal(t, n, u.accepted[id].(api.SendResult).Number, "%s's run number", id)
	}
	require.Equal(t, 1, carried.Carry.Runs)
	require.Equal(t, []api.SendRequest{queue("second"), queue("third")}, carried.Carry.Queue,
		"only the accepted prompts go on")
}

// With no rules the defaults apply: a prompt one byte over
// api.MaxPromptBytes is keel.TooLarge.
func TestSendLimitsDefaults(t *testing.T) {
	env := newRunEnv(t, `{"turns":[{"text":["never"]}]}`)
	u := newUpdates(t, env)
	env.RegisterDelayedCallback(func() {
		u.send(api.UpdateSend, "big", api.SendRequest{Prompt: strings.Repeat("x", api.MaxPromptBytes+1)})
		u.send(api.UpdateSend, "big-config", api.SendRequest{Prompt: "hi",
			Config: &api.RunConfig{System: strings.Repeat("s", api.MaxConfigBytes)}})
	}, 0)
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Second)
	env.ExecuteWorkflow(api.SessionWorkflowName, sessionInput("s1", api.RunConfig{}))
	require.Empty(t, u.accepted)
	require.Equal(t, keel.CodeTooLarge, u.refusal("big").Code)
	require.Equal(t, keel.CodeTooLarge, u.refusal("big-config").Code)
}

func TestLimitsDefaults(t *testing.T) {
	require.Equal(t, api.Limits{PromptBytes: 256 << 10, SteeringBytes: 256 << 10, AnswerBytes: 256 << 10,
		ConfigBytes: 256 << 10, QueuedPrompts: 32, StagedSteers: 32}, api.Limits{}.WithDefaults())
	require.Equal(t, 7, api.Limits{StagedSteers: 7, QueuedPrompts: -1}.WithDefaults().StagedSteers)
	require.Equal(t, 32, api.Limits{QueuedPrompts: -1}.WithDefaults().QueuedPrompts)
}

// The steer update is refused past the worker's count of staged steering
// (keel.TooMany) and size (keel.TooLarge); once a boundary applied the
// staged ones, steering is accepted again. An over-long steering ID is
// refused before a retraction enters history.
func TestSteerLimits(t *testing.T) {
	rules := workflows.Rules{Limits: api.Limits{StagedSteers: 2, SteeringBytes: 16}}
	env := newRulesEnv(t, `{"turns":[
	  {"tool_calls":[{"id":"n1","name":"sleep","arguments":{"seconds":60}}]},
	  {"tool_calls":[{"id":"n2","name":"sleep","arguments":{"seconds":60}}]},
	  {"text":["done"]}]}`, rules)
	u := newUpdates(t, env)
	env.RegisterDelayedCallback(func() {
		u.send(api.UpdateSteer, "s1", api.SteerRequest{Text: "one"})
		u.send(api.UpdateSteer, "s2", api.SteerRequest{Text: "two"})
		u.send(api.UpdateSteer, "s3-full", api.SteerRequest{Text: "three"})
		u.send(api.UpdateSteer, "s-big", api.SteerRequest{Text: strings.Repeat("b", 17)})
		u.send(api.UpdateRetractSteering, "r-big", api.RetractRequest{SteeringID: strings.Repeat("i", api.MaxSteeringIDBytes+1)})
		u.send(api.UpdateRetractSteering, "r-none", api.RetractRequest{SteeringID: "steer-99"})
	}, time.Second)
	env.RegisterDelayedCallback(func() { u.send(api.UpdateSteer, "s4", api.SteerRequest{Text: "four"}) }, 90*time.Second)
	res := env.execSession(t, promptOf("go", "sleep"))

	require.Equal(t, keel.CodeTooMany, u.refusal("s3-full").Code)
	require.True(t, u.refusal("s3-full").Retryable)
	require.Equal(t, keel.CodeTooLarge, u.refusal("s-big").Code)
	require.Equal(t, keel.CodeTooLarge, u.refusal("r-big").Code)
	require.Len(t, u.rejected, 3)
	require.Equal(t, api.RetractResult{Result: api.NotFound}, u.accepted["r-none"])
	var texts []string
	for _, a := range find[keel.SteeringAccepted](t, res.Events) {
		texts = append(texts, a.Text)
	}
	require.Equal(t, []string{"one", "two", "four"}, texts)
	require.Len(t, find[keel.SteeringApplied](t, res.Events), 3)
}

// The respond update is refused past the worker's answer size, before
// the answer is matched against the schema: the request stays open and a
// good answer is delivered.
func TestRespondLimit(t *testing.T) {
	rules := workflows.Rules{Limits: api.Limits{AnswerBytes: 8}}
	env := newRulesEnv(t, `{"turns":[
	  {"tool_calls":[{"id":"c1","name":"ask_user","arguments":{"question":"Name?","schema":{"type":"string"}}}]},
	  {"text":["thanks"]}]}`, rules, tool.AskUser())
	u := newUpdates(t, env)
	env.RegisterDelayedCallback(func() {
		u.send(api.UpdateRespond, "big", api.RespondRequest{RequestID: "c1/ask_user", Answer: json.RawMessage(`"abcdefgh"`)})
		u.send(api.UpdateRespond, "ok", api.RespondRequest{RequestID: "c1/ask_user", Answer: json.RawMessage(`"abc"`)})
	}, time.Minute)
	res := env.execSession(t, promptOf("go", "ask_user"))
	require.Equal(t, keel.CodeTooLarge, u.refusal("big").Code)
	require.Contains(t, u.refusal("big").Message, "is 10 bytes; the limit is 8")
	require.Contains(t, u.accepted, "ok")
	require.Len(t, find[keel.HostInputResolved](t, res.Events), 1)
	require.Equal(t, "abc", res.Messages[2].Content)
}

// Steer and respond signals are re-run on replay, so they never read the
// worker's Rules: they apply the defaults of api.Limits. Here the rules
// allow 2 staged steers, and the signals still stage 32 (the default) and
// drop the 33rd; an answer over api.MaxAnswerBytes arriving as a signal is
// dropped, so the request stays open for the good answer that follows.
// (Before the limits, all 33 were staged and the over-size answer was
// delivered.)
func TestSignalsApplyFixedLimits(t *testing.T) {
	rules := workflows.Rules{Limits: api.Limits{StagedSteers: 2, AnswerBytes: 1 << 30}}
	env := newRulesEnv(t, `{"turns":[
	  {"tool_calls":[{"id":"c1","name":"ask_user","arguments":{"question":"Name?"}}]},
	  {"text":["thanks"]}]}`, rules, tool.AskUser())
	u := newUpdates(t, env)
	huge := json.RawMessage(`"` + strings.Repeat("a", api.MaxAnswerBytes) + `"`)
	env.RegisterDelayedCallback(func() {
		for range api.MaxStagedSteers + 1 {
			env.SignalWorkflow(api.UpdateSteer, api.SteerRequest{Text: "steer"})
		}
		env.SignalWorkflow(api.UpdateRespond, api.RespondRequest{RequestID: "c1/ask_user", Answer: huge})
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		u.send(api.UpdateRespond, "ok", api.RespondRequest{RequestID: "c1/ask_user", Answer: json.RawMessage(`"Ann"`)})
	}, 2*time.Minute)
	res := env.execSession(t, promptOf("go", "ask_user"))
	require.Len(t, find[keel.SteeringAccepted](t, res.Events), api.MaxStagedSteers)
	require.Empty(t, u.rejected, "the good answer found the request open")
	require.Len(t, find[keel.HostInputResolved](t, res.Events), 1)
	require.Equal(t, "Ann", res.Messages[2].Content)
}
