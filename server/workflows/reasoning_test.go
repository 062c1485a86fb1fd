package workflows_test

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/carry"
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
// tool use is a durable event of its step, after the call's
// model_call.completed and before its tool calls.
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
		keel.TypeStepStarted, keel.TypeUsageUpdated, keel.TypeModelCallCompleted, keel.TypeHostedToolActivity,
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

	// A fork at the run, and a fork of its first step, keep it too.
	var atRun, atStep api.ForkPoint
	idleSession(t, carry.SessionInput{Shape: api.ShapeLean, SessionID: "s1", Carry: res.Carry}, func(e *runEnv) {
		var err error
		atRun, err = forkPoint(t, e, api.Point{Run: 1})
		require.NoError(t, err)
		atStep, err = forkPoint(t, e, api.Point{Run: 1, Step: 1})
		require.NoError(t, err)
	})
	require.Equal(t, []keel.ReasoningPart{first}, atRun.Transcript[1].Reasoning)
	require.Equal(t, []keel.ReasoningPart{first}, atStep.Transcript[1].Reasoning)
	forked := idleSession(t, forkInput("f1", atStep))
	require.Equal(t, []keel.ReasoningPart{first}, forked.Carry.Transcript[1].Reasoning)
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

// What keeping reasoning costs the transcript: a ten-step tool loop whose
// every turn thinks 800 bytes, run with reasoning asked for and without.
// Kept, each step's assistant message grows by its reasoning and a few
// dozen bytes of framing; compaction drops the parts of the turns it
// summarizes, so what stays is bounded by the messages it keeps.
func TestReasoningTranscriptBytes(t *testing.T) {
	thought := strings.Repeat("weigh the options; ", 50)[:800]
	var turns []string
	for i := range 10 {
		turns = append(turns, fmt.Sprintf(`{"reasoning":[%q],"tool_calls":[{"id":"c%d","name":"echo","arguments":{"text":"step %d"}}]}`, thought, i, i))
	}
	turns = append(turns, `{"reasoning":["done"],"text":["Done."]}`, `{"text":["a"]}`, `{"text":["b"]}`, `{"text":["c"]}`, `{"text":["after compaction"]}`)
	script := `{"turns":[` + strings.Join(turns, ",") + `]}`
	size := func(msgs []keel.Message) int {
		b, err := json.Marshal(msgs)
		require.NoError(t, err)
		return len(b)
	}
	run := func(r *keel.Reasoning) *carry.SessionCarry {
		in := promptOf("loop", "echo")
		in.Config.Reasoning = r
		return newRunEnv(t, script).execSession(t, in).Carry
	}
	kept, plain := run(&keel.Reasoning{Effort: keel.ReasoningLow}), run(nil)
	perStep := float64(size(kept.Transcript)-size(plain.Transcript)) / 11
	t.Logf("transcript: %d bytes without reasoning, %d with (11 steps): %.0f bytes a step for %d bytes of reasoning",
		size(plain.Transcript), size(kept.Transcript), perStep, len(thought))
	require.InDelta(t, float64(len(thought)*10+len("done"))/11, perStep, 64, "framing per kept part")

	// Three short exchanges after the loop leave compaction a user
	// message to cut before.
	in := promptOf("next")
	more := *kept
	more.Transcript = slices.Clone(kept.Transcript)
	in.Carry = &more
	for _, q := range []string{"a", "b", "c"} {
		in.Carry.Transcript = append(in.Carry.Transcript, keel.UserMessage(q), keel.Message{Role: keel.RoleAssistant, Content: q})
	}
	in.Config.CompactAt = 50
	in.Config.Reasoning = &keel.Reasoning{Effort: keel.ReasoningLow}
	res := newRunEnv(t, script).execSession(t, in)
	require.True(t, res.Replaced, "the run compacted")
	parts := 0
	for _, m := range res.Carry.Transcript {
		parts += len(m.Reasoning)
	}
	t.Logf("after compaction: %d bytes, %d reasoning parts kept of 11", size(res.Carry.Transcript), parts)
	require.Less(t, size(res.Carry.Transcript), size(kept.Transcript)/2)
	require.Zero(t, parts, "the summarized turns' reasoning went with them")
}
