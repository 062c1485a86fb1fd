package workflows_test

import (
	"context"
	"iter"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/server/provider"
	"github.com/keelrun/keel/server/workflows"
)

// requestLog is a provider that keeps every request it is sent.
type requestLog struct {
	provider.Provider
	mu   sync.Mutex
	reqs []provider.Request
}

func (r *requestLog) Stream(ctx context.Context, req provider.Request) iter.Seq2[provider.Chunk, error] {
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
	return r.Provider.Stream(ctx, req)
}

// A run that asks for reasoning keeps what the backend needs back on the
// assistant message, never as its text; the next request of the tool loop
// carries it, and the session hands it over with the transcript. A hosted
// tool use is a durable event of its step, before the call's
// model_call.completed.
func TestReasoningIsKeptAndSentBack(t *testing.T) {
	env := newRunEnv(t, `{"turns":[
	  {"reasoning":["Echo ","first."],"tool_calls":[{"id":"c1","name":"echo","arguments":{"text":"hi"}}],
	   "hosted":[{"name":"web_search","id":"ws1","query":"echo","urls":["https://example.com/echo"],"detail":"1 results"}]},
	  {"reasoning":["Done now."],"text":["Done."]},
	  {"reasoning":["Again."],"text":["Again."]}]}`)
	reqs := &requestLog{Provider: env.acts.Models.(scriptModels).p}
	env.acts.Models = scriptModels{reqs}
	in := promptOf("say hi", "echo")
	in.Config.Reasoning = &keel.Reasoning{Effort: keel.ReasoningLow}
	res := env.execSession(t, in)

	require.Equal(t, "Done.", res.Outcome.Text)
	first := keel.ReasoningPart{Provider: "scripted", Text: "Echo first."}
	require.Equal(t, []keel.ReasoningPart{first}, res.Messages[1].Reasoning)
	require.Equal(t, "", res.Messages[1].Content, "reasoning is not the message's text")
	require.Equal(t, []keel.ReasoningPart{{Provider: "scripted", Text: "Done now."}}, res.Messages[3].Reasoning)
	require.Len(t, reqs.reqs, 2)
	require.Equal(t, keel.Reasoning{Effort: keel.ReasoningLow}, reqs.reqs[1].Reasoning)
	require.Equal(t, []keel.ReasoningPart{first}, reqs.reqs[1].Messages[1].Reasoning, "the second request carries the first turn's reasoning")

	want := []string{keel.TypeRunStarted,
		keel.TypeStepStarted, keel.TypeUsageUpdated, keel.TypeHostedToolActivity, keel.TypeModelCallCompleted,
		keel.TypeToolProposed, keel.TypeToolStarted, keel.TypeToolFinished,
		keel.TypeStepStarted, keel.TypeUsageUpdated, keel.TypeModelCallCompleted, keel.TypeRunCompleted}
	if diff := cmp.Diff(want, types(res.Events)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	hosted := find[keel.HostedToolActivity](t, res.Events)[0]
	require.Equal(t, keel.HostedToolActivity{Step: 1, Attempt: 1, Name: "web_search", ID: "ws1", Query: "echo",
		URLs: []string{"https://example.com/echo"}, Detail: "1 results"}, hosted)

	// The next execution of the session starts from what was handed over,
	// and its first request carries the earlier reasoning.
	require.Equal(t, []keel.ReasoningPart{first}, res.Carry.Transcript[1].Reasoning)
	next := newRunEnv(t, `{"turns":[{"text":["x"]},{"text":["y"]},{"text":["Again."]}]}`)
	later := &requestLog{Provider: next.acts.Models.(scriptModels).p}
	next.acts.Models = scriptModels{later}
	again := promptOf("again")
	again.Carry = res.Carry
	next.execSession(t, again)
	require.Len(t, later.reqs, 1)
	require.Equal(t, []keel.ReasoningPart{first}, later.reqs[0].Messages[1].Reasoning)
}

// A run that does not ask for reasoning keeps none: the transcript holds
// only what a backend returned because it was asked.
func TestNoReasoningKeptUnasked(t *testing.T) {
	env := newRunEnv(t, `{"turns":[{"reasoning":["hm"],"text":["ok"]}]}`)
	res := env.execSession(t, promptOf("go"))
	require.Nil(t, res.Messages[1].Reasoning)
}

// A send whose model cannot take its reasoning setting, or whose setting
// is not one, is refused before its run starts with invalid_input; the
// same setting on a model that takes it runs.
func TestReasoningRefusedAtSend(t *testing.T) {
	rules := workflows.Rules{CheckReasoning: func(spec string, r keel.Reasoning) error {
		if spec == "scripted:old" {
			return keel.Errorf(keel.CodeInvalidInput, "reasoning: old cannot think")
		}
		return nil
	}}
	env := newRulesEnv(t, `{"turns":[{"reasoning":["hm"],"text":["ok"]}]}`, rules)
	u := newUpdates(t, env)
	think := &keel.Reasoning{Effort: keel.ReasoningHigh}
	env.RegisterDelayedCallback(func() {
		u.send(api.UpdateSend, "old", api.SendRequest{Prompt: "a", Config: &api.RunConfig{Model: "scripted:old", Reasoning: think}})
		u.send(api.UpdateSend, "max", api.SendRequest{Prompt: "b", Config: &api.RunConfig{Model: "scripted:test",
			Reasoning: &keel.Reasoning{Effort: "max"}}})
		u.send(api.UpdateSend, "ok", api.SendRequest{Prompt: "c", Config: &api.RunConfig{Model: "scripted:test", Reasoning: think}})
	}, 0)
	env.ExecuteWorkflow(api.SessionWorkflowName, sessionInput("s1", api.RunConfig{}))
	c := continuedAs(t, env).Carry

	require.Equal(t, "reasoning: old cannot think", u.refusal("old").Message)
	require.Equal(t, keel.CodeInvalidInput, u.refusal("max").Code)
	require.Contains(t, u.refusal("max").Message, "reasoning.effort")
	require.Equal(t, 1, c.Runs, "only the send that can think ran")
	require.Equal(t, []keel.ReasoningPart{{Provider: "scripted", Text: "hm"}}, c.Transcript[1].Reasoning)
}
