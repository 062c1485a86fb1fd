package workflows

// Tests of a run's parts on their own: each is built with a recording emit
// function and, where it waits, driven by a small test workflow.

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/provider"
	"github.com/keelrun/keel/server/tool"
)

// recorder is an emitFunc that keeps what it was given.
type recorder struct{ events []keel.Event }

func (r *recorder) emit(ev keel.Event) { r.events = append(r.events, ev) }

func (r *recorder) types() []string {
	var out []string
	for _, ev := range r.events {
		out = append(out, ev.EventType())
	}
	return out
}

// Steering is applied in acceptance order; a retraction wins only before
// the boundary (docs/contract.md §5).
func TestSteeringStageRetractApply(t *testing.T) {
	var rec recorder
	s := newSteering(rec.emit)
	img := []keel.Attachment{{Kind: keel.AttachmentImage, MediaType: "image/png", Key: "sha256:" + strings.Repeat("a", 64), Size: 9, Bytes: 9}}
	a, b, c := s.stage("first", img), s.stage("second", nil), s.stage("third", nil)
	require.Equal(t, []string{"steer-1", "steer-2", "steer-3"}, []string{a, b, c})
	require.Equal(t, api.Retracted, s.retract(b))
	require.Equal(t, api.NotFound, s.retract(b), "a retracted steer is gone")
	require.Equal(t, []string{a, c}, s.stagedIDs())
	require.True(t, s.pending())

	msgs := s.apply()
	require.Len(t, msgs, 2)
	require.Equal(t, "first", msgs[0].Content)
	require.Equal(t, a, msgs[0].SteeringID)
	require.Equal(t, img, msgs[0].Attachments, "steering keeps its attachments")
	require.Equal(t, "third", msgs[1].Content)
	require.False(t, s.pending())
	require.Equal(t, api.AlreadyApplied, s.retract(a))
	require.Equal(t, api.NotFound, s.retract("steer-9"))
	require.Equal(t, []string{keel.TypeSteeringAccepted, keel.TypeSteeringAccepted, keel.TypeSteeringAccepted,
		keel.TypeSteeringRetracted, keel.TypeSteeringApplied, keel.TypeSteeringApplied}, rec.types())
}

// An answer to a request whose requester stopped waiting is refused with
// requester_gone, ahead of the run's own state; other bad answers get
// their own codes (docs/contract.md §6).
func TestHostInputValidate(t *testing.T) {
	var rec recorder
	changes := 0
	h := newHostInput("s/run-1", rec.emit, func() { changes++ })
	h.byID["c1/q"] = &hostRequest{HostRequest: api.HostRequest{RequestID: "c1/q", ToolCallID: "c1"}, gone: true}
	h.byID["c2/q"] = &hostRequest{HostRequest: api.HostRequest{RequestID: "c2/q", ToolCallID: "c2",
		Schema: json.RawMessage(`{"type":"object","required":["approved"]}`)}}
	h.order = append(h.order, h.byID["c1/q"], h.byID["c2/q"])
	open := func() error { return nil }
	closed := func() error { return wireError(&keel.Error{Code: keel.CodeNotAccepting, Message: "closed"}) }

	cases := []struct {
		name      string
		req       api.RespondRequest
		accepting func() error
		want      keel.Code
	}{
		{"gone requester", api.RespondRequest{RequestID: "c1/q", Answer: []byte(`true`)}, closed, keel.CodeRequesterGone},
		{"unknown request", api.RespondRequest{RequestID: "c9/q", Answer: []byte(`true`)}, open, keel.CodeUnknownRequest},
		{"unknown request, run closed", api.RespondRequest{RequestID: "c9/q", Answer: []byte(`true`)}, closed, keel.CodeNotAccepting},
		{"empty answer", api.RespondRequest{RequestID: "c2/q"}, open, keel.CodeInvalidAnswer},
		{"answer against the schema", api.RespondRequest{RequestID: "c2/q", Answer: []byte(`{"reason":"x"}`)}, open, keel.CodeInvalidAnswer},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := h.validate(c.req, c.accepting)
			var appErr *temporal.ApplicationError
			require.True(t, errors.As(err, &appErr), "got %v", err)
			require.Equal(t, string(c.want), appErr.Type())
		})
	}
	good := api.RespondRequest{RequestID: "c2/q", Answer: []byte(`{"approved":true}`)}
	require.NoError(t, h.validate(good, open))
	h.respond(good)
	require.Equal(t, 1, changes)
	require.False(t, h.waiting())
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(h.validate(good, open), &appErr))
	require.Equal(t, string(keel.CodeUnknownRequest), appErr.Type(), "a second answer is refused")
}

// The retry budget of one turn, case by case (docs/contract.md §4).
func TestTurnBudget(t *testing.T) {
	malformed := &activities.TurnFailure{Malformed: "bad tool-call JSON"}
	t.Run("malformed is retried at once, twice", func(t *testing.T) {
		b := turnBudget{model: "openai:gpt"}
		for attempt := 1; attempt <= maxMalformedPerTurn; attempt++ {
			evs, delay, err := b.next(1, attempt, malformed)
			require.Nil(t, err)
			require.Zero(t, delay)
			require.Len(t, evs, 1)
			require.Equal(t, keel.ResetMalformed, evs[0].(keel.ProviderStreamReset).Reason.Kind)
		}
		_, _, err := b.next(1, 3, malformed)
		require.NotNil(t, err)
		require.Equal(t, keel.CodeMalformedResponse, err.Code)
		require.Equal(t, "openai", err.Provider.Provider)
	})
	t.Run("retryable failures back off 1s, 2s, 4s then give up", func(t *testing.T) {
		b := turnBudget{model: "openai:gpt"}
		for attempt, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second} {
			fail := &activities.TurnFailure{Provider: &keel.ProviderError{Provider: "openai", Kind: keel.ProviderServer, Status: 503, Retryable: true}}
			evs, delay, err := b.next(1, attempt, fail)
			require.Nil(t, err)
			require.Equal(t, want, delay)
			require.Equal(t, keel.Duration(want), evs[1].(keel.ProviderRequestRetry).Delay)
		}
		fail := &activities.TurnFailure{Provider: &keel.ProviderError{Provider: "openai", Kind: keel.ProviderServer, Status: 503, Retryable: true}}
		_, _, err := b.next(1, maxRequestsPerTurn, fail)
		require.NotNil(t, err)
		require.Equal(t, keel.CodeProvider, err.Code)
		require.True(t, err.Retryable)
	})
	t.Run("a Retry-After hint is honoured and capped", func(t *testing.T) {
		b := turnBudget{model: "openai:gpt"}
		fail := &activities.TurnFailure{Provider: &keel.ProviderError{Provider: "openai", Kind: keel.ProviderRateLimited,
			Status: 429, Retryable: true, RetryAfter: keel.Duration(120 * time.Second)}}
		evs, delay, err := b.next(1, 1, fail)
		require.Nil(t, err)
		require.Equal(t, time.Minute, delay)
		reset := evs[0].(keel.ProviderStreamReset)
		require.Equal(t, keel.Duration(120*time.Second), *reset.Reason.RetryAfter)
	})
	t.Run("a permanent failure ends the turn, named after the run's provider", func(t *testing.T) {
		b := turnBudget{model: "anthropic:claude"}
		fail := &activities.TurnFailure{Provider: &keel.ProviderError{Provider: "keel", Kind: keel.ProviderInvalidRequest, Message: "no"}}
		evs, _, err := b.next(1, 1, fail)
		require.Nil(t, evs)
		require.NotNil(t, err)
		require.Equal(t, "anthropic", err.Provider.Provider)
		require.False(t, err.Retryable)
	})
}

// Compaction cuts before a user message and counts the turns it replaces
// (docs/contract.md §9).
func TestCompactionCutAndSummary(t *testing.T) {
	msgs := []keel.Message{
		{Role: keel.RoleUser, Content: "summary", CompactedTurns: 3},
		keel.UserMessage("q1"),
		{Role: keel.RoleAssistant, Content: "a1"},
		keel.UserMessage("q2"),
		{Role: keel.RoleAssistant, Content: "call", ToolCalls: []keel.ToolCall{{ID: "c1", Name: "echo"}}},
		{Role: keel.RoleUser, ToolCallID: "c1", Content: "result"},
		{Role: keel.RoleAssistant, Content: "partial", Aborted: true},
		keel.UserMessage("q3"),
		{Role: keel.RoleAssistant, Content: "a3"},
		keel.UserMessage("q4"),
		{Role: keel.RoleAssistant, Content: "a4"},
	}
	cut := compactionCut(msgs)
	require.Equal(t, 3, cut, "the latest plain user message at least keepRecent from the end")
	sum := summaryMessage(msgs[:cut], "earlier")
	require.Equal(t, 4, sum.CompactedTurns, "3 compacted before plus a1")
	require.Zero(t, compactionCut(msgs[:keepRecent]), "too short to compact")

	var tr transcript
	tr.messages, tr.base = msgs, 1
	require.Len(t, tr.ship(), len(msgs))
	require.Empty(t, tr.ship())
	tr.replace(cut, sum)
	got, replaced := tr.result()
	require.True(t, replaced)
	require.Len(t, got, len(msgs)-cut+1)
	require.Equal(t, 1, tr.generation)
	require.Len(t, tr.ship(), len(got), "a replaced transcript is shipped whole again")
}

// scriptedAsker answers every question with one answer.
type scriptedAsker struct {
	answer json.RawMessage
	asked  []string
}

func (a *scriptedAsker) newBatch() {}

func (a *scriptedAsker) ask(ctx workflow.Context, callID string, q tool.Question) (json.RawMessage, error) {
	a.asked = append(a.asked, callID+"/"+q.ID)
	return a.answer, nil
}

// A batch closes every call once, in model order, without any activity
// when none may run: unavailable, denied by policy, declined by the host
// (docs/contract.md §2.6).
func TestToolBatchWithoutActivities(t *testing.T) {
	var rec recorder
	asker := &scriptedAsker{answer: json.RawMessage(`{"approved":false,"reason":"not today"}`)}
	var msgs []keel.Message
	wf := func(ctx workflow.Context) error {
		work, _ := workflow.WithCancel(ctx)
		tb := &tools{root: ctx, work: work, emit: rec.emit, host: asker, lastSeq: func() int64 { return 0 },
			cfg: api.RunConfig{Approvals: map[string]api.Approval{"rm": api.ApprovalDeny, "deploy": api.ApprovalAsk}}}
		res := &activities.ModelTurnResult{
			Response: provider.Response{ToolCalls: []keel.ToolCall{
				{ID: "c1", Name: "nope"}, {ID: "c2", Name: "rm"}, {ID: "c3", Name: "deploy"}}},
			Calls: []activities.CallPlan{{}, {Available: true}, {Available: true}},
		}
		msgs = tb.runBatch(1, res)
		return nil
	}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(wf)
	env.ExecuteWorkflow(wf)
	require.NoError(t, env.GetWorkflowError())

	require.Equal(t, []string{"c3/approval"}, asker.asked)
	var statuses []string
	for _, ev := range rec.events {
		switch e := ev.(type) {
		case keel.ToolStarted:
			t.Fatalf("%s started", e.ToolCallID)
		case keel.ToolFinished:
			statuses = append(statuses, e.ToolCallID+":"+string(e.Status))
		}
	}
	require.Equal(t, []string{"c1:unavailable", "c2:error", "c3:error"}, statuses)
	require.Len(t, msgs, 3)
	require.Equal(t, "c1", msgs[0].ToolCallID)
	require.Contains(t, msgs[2].Content, "not today")
}

// ask waits for the answer durably; a cancelled requester closes its
// request as interrupted and a request ID serves once per batch
// (docs/contract.md §6).
func TestHostInputAsk(t *testing.T) {
	var rec recorder
	var got json.RawMessage
	var dupErr, cancelErr error
	wf := func(ctx workflow.Context) error {
		h := newHostInput("s/run-1", rec.emit, func() {})
		q := tool.Question{ID: "q", Prompt: "name?"}
		workflow.Go(ctx, func(ctx workflow.Context) {
			_ = workflow.Await(ctx, h.waiting)
			h.respond(api.RespondRequest{RequestID: "c1/q", Answer: json.RawMessage(`"keel"`)})
		})
		var err error
		if got, err = h.ask(ctx, "c1", q); err != nil {
			return err
		}
		_, dupErr = h.ask(ctx, "c1", q)
		cctx, cancel := workflow.WithCancel(ctx)
		workflow.Go(ctx, func(ctx workflow.Context) {
			_ = workflow.Await(ctx, h.waiting)
			cancel()
		})
		_, cancelErr = h.ask(cctx, "c2", q)
		return nil
	}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(wf)
	env.ExecuteWorkflow(wf)
	require.NoError(t, env.GetWorkflowError())

	require.JSONEq(t, `"keel"`, string(got))
	var kerr *keel.Error
	require.True(t, errors.As(dupErr, &kerr))
	require.Equal(t, keel.CodeDuplicateRequest, kerr.Code)
	require.ErrorIs(t, cancelErr, keel.ErrCancelled)
	require.Equal(t, []string{keel.TypeHostInputRequested, keel.TypeHostInputResolved,
		keel.TypeHostInputRequested, keel.TypeHostInputResolved}, rec.types())
	require.True(t, rec.events[3].(keel.HostInputResolved).Interrupted)
	require.False(t, rec.events[1].(keel.HostInputResolved).Interrupted)
}
