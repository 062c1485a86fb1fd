package workflows_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/carry"
	"github.com/keelrun/keel/internal/delegation"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/provider"
	"github.com/keelrun/keel/server/tool"
	"github.com/keelrun/keel/server/worker"
	"github.com/keelrun/keel/server/workflows"
)

// specModels resolves each model spec to its own provider.
type specModels map[string]provider.Provider

func (m specModels) Resolve(spec string) (provider.Provider, string, error) {
	p, ok := m[spec]
	if !ok {
		return nil, "", fmt.Errorf("no model %s", spec)
	}
	return p, spec, nil
}

// byPrompt plays, of its scripts, the one whose key the conversation's
// first message contains: two children of one agent get different tasks
// and so play different scripts.
type byPrompt map[string]provider.Provider

func (b byPrompt) Name() string { return "scripted" }

func (b byPrompt) Stream(ctx context.Context, req provider.Request) iter.Seq2[provider.Chunk, error] {
	for key, p := range b {
		if len(req.Messages) > 0 && strings.Contains(req.Messages[0].Content, key) {
			return p.Stream(ctx, req)
		}
	}
	return func(yield func(provider.Chunk, error) bool) {
		yield(provider.Chunk{}, &keel.ProviderError{Provider: "scripted", Kind: keel.ProviderInvalidRequest, Message: "no script for this task"})
	}
}

var delegationAgents = map[string]delegation.AgentSpec{
	"planner": {Name: "planner", Model: "scripted:planner", Instructions: "Split the task and delegate.",
		Tools: []string{"agent__researcher"}, Agents: []string{"researcher"}},
	"researcher": {Name: "researcher", Model: "scripted:researcher", Instructions: "Find the facts.",
		Tools: []string{"ask_user", "sleep"}, OutputSchema: factsSchema},
}

// newDelegationEnv is an environment whose worker offers the agents of
// delegationAgents, with the given scripts per model spec.
func newDelegationEnv(t *testing.T, models specModels, agents map[string]delegation.AgentSpec, limits delegation.DelegationLimits) *runEnv {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	mem := live.NewMemory()
	t.Cleanup(func() { _ = mem.Close() })
	tools := testTools(t, tool.AskUser())
	for _, a := range agents {
		require.NoError(t, tools.Register(tool.AgentTool(a.Name, a.Description, a.Detached)))
	}
	acts := &activities.Activities{Models: models, Tools: tools, Live: mem, Agents: agents, Delegation: limits}
	worker.RegisterWithRules(env, acts, workflows.Rules{Agents: agents})
	// The session's workflow ID is its session ID, as clients start it: a
	// child reports to its parent by that ID.
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "s1"})
	return &runEnv{TestWorkflowEnvironment: env, live: mem, acts: acts}
}

// collectDeltas gathers what the live channel delivers to a subscriber
// of session.
func collectDeltas(t *testing.T, mem *live.Memory, session string) func() []keel.Envelope {
	t.Helper()
	sub, err := mem.Subscribe(context.Background(), session, live.SubscribeOptions{Buffer: 1 << 14})
	require.NoError(t, err)
	var mu sync.Mutex
	var got []keel.Envelope
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			env, err := sub.Next(context.Background())
			if errors.Is(err, live.ErrClosed) {
				return
			}
			if err != nil {
				continue
			}
			mu.Lock()
			got = append(got, env)
			mu.Unlock()
		}
	}()
	return func() []keel.Envelope {
		_ = sub.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return got
	}
}

// docs/contract.md §21.3–21.5: a planner delegates to two researchers in
// one batch; they run at once as child sessions; one asks the host a
// question, which the parent lists with the child's path and the child
// takes; each child's structured answer is its call's result; the
// children's usage counts as the parent's; their deltas reach the
// parent's stream with their paths.
func TestPlannerDelegatesToTwoResearchers(t *testing.T) {
	planner := scriptedProvider(t, `{"turns":[
	  {"text":["Splitting."],"tool_calls":[
	    {"id":"c1","name":"agent__researcher","arguments":{"task":"facts on A (ask the user)"}},
	    {"id":"c2","name":"agent__researcher","arguments":{"task":"facts on B","context":"B is blue"}}],
	   "usage":{"input_tokens":10,"output_tokens":5}},
	  {"text":["Both done."],"usage":{"input_tokens":20,"output_tokens":2}}]}`)
	asker := scriptedProvider(t, `{"turns":[
	  {"tool_calls":[{"id":"q1","name":"ask_user","arguments":{"question":"Which year?"}}],"usage":{"input_tokens":3,"output_tokens":1}},
	  {"text":["{\"facts\":[\"A in ", "1999\"]}"],"usage":{"input_tokens":4,"output_tokens":2}}]}`)
	plain := scriptedProvider(t, `{"turns":[{"text":["{\"facts\":[\"B is blue\"]}"],"usage":{"input_tokens":5,"output_tokens":3}}]}`)
	env := newDelegationEnv(t, specModels{"scripted:planner": planner,
		"scripted:researcher": byPrompt{"ask the user": asker, "facts on B": plain}}, delegationAgents, delegation.DelegationLimits{})
	deltas := collectDeltas(t, env.live, "s1")

	var waiting api.SessionStatus
	var child api.SessionStatus
	var childID string
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(api.QueryState)
		require.NoError(t, err)
		require.NoError(t, v.Get(&waiting))
		require.NotNil(t, waiting.Run)
		require.NotEmpty(t, waiting.Run.Children)
		childID = waiting.Run.Children[0].SessionID
		v, err = env.QueryWorkflowByID(childID, api.QueryState)
		require.NoError(t, err)
		require.NoError(t, v.Get(&child))
		// The question is answered where it lives: the child session.
		require.NoError(t, env.UpdateWorkflowByID(childID, api.UpdateRespond, "answer",
			&testsuite.TestUpdateCallback{OnReject: func(err error) { t.Errorf("answer refused: %v", err) },
				OnAccept: func() {}, OnComplete: func(any, error) {}},
			api.RespondRequest{RequestID: "q1/ask_user", Answer: json.RawMessage(`"1999"`)}))
	}, time.Minute)
	res := env.execSession(t, sessionSend{Prompt: "Research A and B", Config: api.RunConfig{Agent: "planner"}})
	relayed := deltas()

	// While the child waited, the parent listed its request.
	require.Equal(t, keel.StateWaitingForHostInput, waiting.State)
	require.NotNil(t, waiting.Run)
	require.Len(t, waiting.Run.Requests, 1)
	r := waiting.Run.Requests[0]
	require.Equal(t, "researcher-1:q1/ask_user", r.RequestID)
	require.Equal(t, "researcher-1", r.Path)
	// The child's ID ends in what the parent drew (a side effect): no one
	// could have known it, and taken it, before the child started.
	require.True(t, strings.HasPrefix(childID, "s1--researcher-1-") && api.IsChildSessionID(childID), childID)
	require.Equal(t, childID, r.SessionID)
	require.Equal(t, "Which year?", r.Prompt)
	require.Equal(t, []api.ChildRef{{ToolCallID: "c1", Agent: "researcher", Path: "researcher-1", SessionID: childID}},
		waiting.Run.Children, "researcher-2 answered at once; researcher-1 waits for its answer")
	require.NotNil(t, child.Delegated)
	require.Equal(t, "s1", child.Delegated.Parent)
	require.Equal(t, "researcher-1", child.Delegated.Path)

	evs := res.Events
	require.Equal(t, "planner", find[keel.RunStarted](t, evs)[0].Agent)
	started := find[keel.AgentStarted](t, evs)
	require.Len(t, started, 2)
	require.Equal(t, keel.AgentStarted{ToolCallID: "c1", Agent: "researcher", SessionID: childID, Path: "researcher-1"}, started[0])
	require.True(t, strings.HasPrefix(started[1].SessionID, "s1--researcher-2-") && api.IsChildSessionID(started[1].SessionID))
	require.NotEqual(t, childID[len("s1--researcher-1"):], started[1].SessionID[len("s1--researcher-2"):], "each child draws its own")
	// Parallel: both started before either finished.
	_, firstFinish := at(evs, keel.TypeAgentFinished, 0)
	_, secondStart := at(evs, keel.TypeAgentStarted, 0)
	_, secondStart = at(evs, keel.TypeAgentStarted, secondStart+1)
	require.Less(t, secondStart, firstFinish)

	finished := find[keel.AgentFinished](t, evs)
	require.Len(t, finished, 2)
	for _, f := range finished {
		require.Equal(t, keel.StatusCompleted, f.Status, f.Path)
	}
	outs := map[string]string{}
	for _, f := range find[keel.ToolFinished](t, evs) {
		outs[f.ToolCallID] = f.Output
		require.Equal(t, keel.ToolOK, f.Status)
	}
	require.Equal(t, `{"facts":["A in 1999"]}`, outs["c1"], "the structured answer is the call's result")
	require.Equal(t, `{"facts":["B is blue"]}`, outs["c2"])

	// Usage rolls up: the planner's two requests and the children's three.
	o := res.Outcome
	require.Equal(t, keel.StatusCompleted, o.Status)
	require.Equal(t, int64(10+20+3+4+5), o.UsageTotal.InputTokens)
	require.Equal(t, 5, o.UsageTotal.Requests)
	require.Equal(t, o.UsageTotal, res.Carry.Usage, "and into the session's")
	require.Equal(t, 2, res.Carry.Delegations, "the count goes on across hand-overs")

	// The children's deltas reached the parent's stream with their paths.
	paths := map[string]string{}
	for _, d := range relayed {
		if d.Type == keel.TypeTextDelta && d.Path != "" {
			ev, err := d.Event()
			require.NoError(t, err)
			paths[d.Path] += ev.(keel.TextDelta).Text
			require.Equal(t, "s1", d.SessionID)
			require.Equal(t, keel.RunID("s1", 1), d.RunID)
		}
	}
	require.Equal(t, `{"facts":["A in 1999"]}`, paths["researcher-1"])
	require.Equal(t, `{"facts":["B is blue"]}`, paths["researcher-2"])
}

// docs/contract.md §21.3: cancelling the parent cancels its child
// cooperatively: the child commits its run as cancelled, the call's result
// is interrupted, and only then does the parent commit its own
// run.cancelled. A shutdown reaches the child the same way (§13).
func TestCancelParentCancelsChild(t *testing.T) {
	for _, signal := range []string{api.SignalCancel, api.SignalShutdown} {
		t.Run(signal, func(t *testing.T) { cancelParentCancelsChild(t, signal) })
	}
}

func cancelParentCancelsChild(t *testing.T, signal string) {
	planner := scriptedProvider(t, `{"turns":[
	  {"tool_calls":[{"id":"c1","name":"agent__researcher","arguments":{"task":"slow facts"}}]},
	  {"text":["never"]}]}`)
	slow := scriptedProvider(t, `{"turns":[
	  {"tool_calls":[{"id":"z","name":"sleep","arguments":{"seconds":3600}}],"usage":{"input_tokens":3,"output_tokens":1}},
	  {"text":["{\"facts\":[]}"]}]}`)
	env := newDelegationEnv(t, specModels{"scripted:planner": planner, "scripted:researcher": slow}, delegationAgents, delegation.DelegationLimits{})
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(signal, nil) }, 10*time.Minute)
	res := env.execSession(t, sessionSend{Prompt: "Research", Config: api.RunConfig{Agent: "planner"}})
	evs := res.Events
	fin := find[keel.AgentFinished](t, evs)
	require.Len(t, fin, 1)
	require.Equal(t, keel.StatusCancelled, fin[0].Status, "the child committed its run as cancelled")
	require.Equal(t, int64(3), fin[0].Usage.InputTokens, "what the child spent still counts")
	tf := find[keel.ToolFinished](t, evs)
	require.Equal(t, keel.ToolInterrupted, tf[0].Status)
	_, agentEnd := at(evs, keel.TypeAgentFinished, 0)
	_, runEnd := at(evs, keel.TypeRunCancelled, 0)
	require.Less(t, agentEnd, runEnd, "the child ended before the parent committed")
	require.Equal(t, keel.StatusCancelled, res.Outcome.Status)
	require.Equal(t, int64(3), res.Outcome.UsageTotal.InputTokens)
}

// docs/contract.md §21.2: a send naming an agent the worker lacks, or
// setting what the agent defines, is refused before history.
func TestAgentRefusals(t *testing.T) {
	planner := scriptedProvider(t, `{"turns":[
	  {"tool_calls":[{"id":"c1","name":"agent__researcher","arguments":{"task":"x"}},
	                 {"id":"c2","name":"agent__researcher","arguments":{"nope":"x"}}]},
	  {"text":["ok"]}]}`)
	env := newDelegationEnv(t, specModels{"scripted:planner": planner}, delegationAgents, delegation.DelegationLimits{Depth: 1, FanOut: 1})
	u := newUpdates(t, env)
	env.RegisterDelayedCallback(func() {
		u.send(api.UpdateSend, "ghost", api.SendRequest{Prompt: "x", Config: &api.RunConfig{Agent: "ghost"}})
		u.send(api.UpdateSend, "own-model", api.SendRequest{Prompt: "x", Config: &api.RunConfig{Agent: "planner", Model: "scripted:other"}})
		u.send(api.UpdateSend, "bad-name", api.SendRequest{Prompt: "x", Config: &api.RunConfig{Agent: "no spaces"}})
	}, 0)
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Second)
	env.ExecuteWorkflow(api.SessionWorkflowName, sessionInput("s1", api.RunConfig{}))
	require.Empty(t, u.accepted)
	for _, id := range []string{"ghost", "own-model", "bad-name"} {
		require.NotNil(t, u.rejected[id], id)
		require.Equal(t, keel.CodeInvalidInput, u.rejected[id].Code, id)
	}
	require.Contains(t, u.refusal("ghost").Message, "not offered")
	require.Contains(t, u.refusal("own-model").Message, "defines its model")
}

// A child of a child at the depth limit gets an error result, never a
// session; arguments that are not a task get the tool's error.
func TestDelegationDepthLimit(t *testing.T) {
	agents := map[string]delegation.AgentSpec{
		"a": {Name: "a", Model: "scripted:a", Tools: []string{"agent__b"}, Agents: []string{"b"}},
		"b": {Name: "b", Model: "scripted:b", Tools: []string{"agent__c"}, Agents: []string{"c"}},
		"c": {Name: "c", Model: "scripted:c"},
	}
	a := scriptedProvider(t, `{"turns":[
	  {"tool_calls":[{"id":"ab","name":"agent__b","arguments":{"task":"go deeper"}},
	                 {"id":"bad","name":"agent__b","arguments":{"nope":1}}]},
	  {"text":["a done"]}]}`)
	b := scriptedProvider(t, `{"turns":[
	  {"tool_calls":[{"id":"bc","name":"agent__c","arguments":{"task":"deeper still"}}],"usage":{"input_tokens":10,"output_tokens":1}},
	  {"text":["b done"],"usage":{"input_tokens":10,"output_tokens":1}}]}`)
	c := scriptedProvider(t, `{"turns":[{"text":["c done"],"usage":{"input_tokens":1000,"output_tokens":1}}]}`)
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	tools := testTools(t)
	for _, n := range []string{"b", "c"} {
		require.NoError(t, tools.Register(tool.AgentTool(n, "", false)))
	}
	acts := &activities.Activities{Models: specModels{"scripted:a": a, "scripted:b": b, "scripted:c": c}, Tools: tools,
		Agents: agents, Delegation: delegation.DelegationLimits{Depth: 1}}
	worker.RegisterWithRules(env, acts, workflows.Rules{Agents: agents})
	e := &runEnv{TestWorkflowEnvironment: env, acts: acts}
	// The session delegated twice before: its next child is its third.
	res := e.execSession(t, sessionSend{Prompt: "deep", Config: api.RunConfig{Agent: "a"},
		Carry: &carry.SessionCarry{Delegations: 2}})
	outs := map[string]keel.ToolFinished{}
	for _, f := range find[keel.ToolFinished](t, res.Events) {
		outs[f.ToolCallID] = f
	}
	require.Equal(t, keel.ToolOK, outs["ab"].Status)
	require.Equal(t, "b done", outs["ab"].Output, "b answered, having been refused c: depth 2 is past the limit of 1")
	require.Equal(t, keel.ToolError, outs["bad"].Status)
	require.Contains(t, outs["bad"].Output, `unknown field "nope"`)
	started := find[keel.AgentStarted](t, res.Events)
	require.Len(t, started, 1, "the bad call started no child")
	require.True(t, strings.HasPrefix(started[0].SessionID, "s1--b-3-") && api.IsChildSessionID(started[0].SessionID), started[0].SessionID)
	started[0].SessionID = ""
	require.Equal(t, keel.AgentStarted{ToolCallID: "ab", Agent: "b", Path: "b-3"}, started[0],
		"child paths never repeat within a session")
	require.Equal(t, 3, res.Carry.Delegations)
	require.Equal(t, int64(20), res.Outcome.UsageTotal.InputTokens, "b's two requests count, and no request of c's: it never ran")
}

// A detached agent's delegation runs as a detached tool does
// (docs/contract.md §8, §21.3): the call gets a placeholder, the parent
// goes on, and the child's answer enters at a later step boundary.
func TestDetachedDelegation(t *testing.T) {
	agents := map[string]delegation.AgentSpec{
		"planner": {Name: "planner", Model: "scripted:planner", Tools: []string{"agent__bg"}, Agents: []string{"bg"}},
		"bg":      {Name: "bg", Model: "scripted:bg", Tools: []string{"sleep"}, Detached: true},
	}
	planner := scriptedProvider(t, `{"turns":[
	  {"tool_calls":[{"id":"d1","name":"agent__bg","arguments":{"task":"slowly"}}]},
	  {"text":["meanwhile"]},
	  {"text":["all done"]}]}`)
	bg := scriptedProvider(t, `{"turns":[
	  {"tool_calls":[{"id":"z","name":"sleep","arguments":{"seconds":60}}]},
	  {"text":["background answer"]}]}`)
	env := newDelegationEnv(t, specModels{"scripted:planner": planner, "scripted:bg": bg}, agents, delegation.DelegationLimits{})
	res := env.execSession(t, sessionSend{Prompt: "go", Config: api.RunConfig{Agent: "planner"}})
	evs := res.Events
	require.Len(t, find[keel.ToolDetached](t, evs), 1)
	_, detached := at(evs, keel.TypeToolDetached, 0)
	_, second := at(evs, keel.TypeStepStarted, 0)
	_, second = at(evs, keel.TypeStepStarted, second+1)
	_, finished := at(evs, keel.TypeAgentFinished, 0)
	require.Less(t, detached, second, "the parent went on while the child ran")
	require.Less(t, second, finished)
	require.Equal(t, "all done", res.Outcome.Text)
	var sawResult bool
	for _, m := range res.Messages {
		sawResult = sawResult || (m.ToolCallID == "d1" && strings.Contains(m.Content, "background answer"))
	}
	require.True(t, sawResult, "the child's answer entered the transcript as the job's result")
}

// docs/contract.md §21.3: a child's ID taken by a workflow the parent did
// not start for the call (here one the test starts under it just before)
// fails the call, and the parent's log links to no session: its
// agent.finished names none.
func TestDelegationToATakenIDLinksNoSession(t *testing.T) {
	planner := scriptedProvider(t, `{"turns":[
	  {"tool_calls":[{"id":"c1","name":"agent__researcher","arguments":{"task":"facts"}}]},
	  {"text":["went on"]}]}`)
	env := newDelegationEnv(t, specModels{"scripted:planner": planner}, delegationAgents, delegation.DelegationLimits{})
	env.RegisterWorkflowWithOptions(func(workflow.Context) error { return nil }, workflow.RegisterOptions{Name: "squatter"})
	env.SetWorkerOptions(sdkworker.Options{Interceptors: []interceptor.WorkerInterceptor{&takeChildIDs{}}})
	u := newUpdates(t, env)
	env.RegisterDelayedCallback(func() {
		u.send(api.UpdateSend, "go", api.SendRequest{Prompt: "Research", Config: &api.RunConfig{Agent: "planner"}})
	}, 0)
	env.ExecuteWorkflow(api.SessionWorkflowName, sessionInput("s1", api.RunConfig{}))
	in := continuedAs(t, env)
	evs := in.Carry.Tail
	checkLog(t, 0, evs)
	started := find[keel.AgentStarted](t, evs)
	require.Len(t, started, 1)
	require.True(t, api.IsChildSessionID(started[0].SessionID), started[0].SessionID)
	fin := find[keel.AgentFinished](t, evs)
	require.Len(t, fin, 1)
	require.Equal(t, keel.StatusFailed, fin[0].Status)
	require.Empty(t, fin[0].SessionID, "the parent did not start what holds the ID")
	require.Contains(t, fin[0].Error.Message, "taken")
	tf := find[keel.ToolFinished](t, evs)
	require.Equal(t, keel.ToolError, tf[0].Status)
	require.Contains(t, tf[0].Output, "taken")
	require.Equal(t, "went on", in.Carry.Last.Text)
}

// takeChildIDs starts a workflow of its own under each child session's
// ID just before the parent starts the child there.
type takeChildIDs struct {
	interceptor.WorkerInterceptorBase
}

func (*takeChildIDs) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &takeIn{interceptor.WorkflowInboundInterceptorBase{Next: next}}
}

type takeIn struct {
	interceptor.WorkflowInboundInterceptorBase
}

func (i *takeIn) Init(out interceptor.WorkflowOutboundInterceptor) error {
	return i.Next.Init(&takeOut{interceptor.WorkflowOutboundInterceptorBase{Next: out}})
}

type takeOut struct {
	interceptor.WorkflowOutboundInterceptorBase
}

func (o *takeOut) ExecuteChildWorkflow(ctx workflow.Context, name string, args ...any) workflow.ChildWorkflowFuture {
	if name == api.SessionWorkflowName {
		// Not the parent's to cancel as it closes: it is someone else's.
		opts := workflow.GetChildWorkflowOptions(ctx)
		opts.ParentClosePolicy = enumspb.PARENT_CLOSE_POLICY_ABANDON
		o.Next.ExecuteChildWorkflow(workflow.WithChildOptions(ctx, opts), "squatter")
	}
	return o.Next.ExecuteChildWorkflow(ctx, name, args...)
}
