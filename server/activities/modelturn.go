package activities

import (
	"context"
	"errors"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/provider"
	"github.com/keelrun/keel/server/tool"
)

// ModelTurn makes one provider request: it streams the response, publishes
// each delta to the live channel, heartbeats once a HeartbeatEvery, and
// returns the assembled response. It never retries: the run (workflow code) owns the retry
// budget so it can record every attempt. Failures are ApplicationErrors of
// type keel.ProviderError or keel.MalformedResponse with a TurnFailure as
// detail; cancellation returns a CanceledError carrying the partial text.
func (a *Activities) ModelTurn(ctx context.Context, in ModelTurnInput) (turn *ModelTurnResult, err error) {
	start := time.Now()
	if in.CheckRuntime && a.Lifecycle != nil {
		down, err := a.Lifecycle.ShutDown(ctx)
		if err != nil {
			return nil, err // transient: the run tries again
		}
		if down {
			return nil, temporal.NewApplicationErrorWithOptions(keel.ErrRuntimeShutdown.Message, string(keel.CodeRuntimeShutdown),
				temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{TurnFailure{Shutdown: true, Unsent: true}}})
		}
	}
	p, model, messages, err := a.prepare(ctx, in.Model, in.Transcript, in.Tail)
	if err != nil {
		return nil, err
	}
	ctx, obs := a.observeTurn(ctx, in, p.Name(), model, a.modelLabel(in.Model, model))
	defer func() { obs.end(ctx, turn, err) }()
	var specs []keel.ToolSpec
	var plans map[string]CallPlan
	if len(in.Tools) > 0 {
		specs, plans, err = a.toolSpecs(in.Tools)
		if err != nil {
			return nil, temporal.NewNonRetryableApplicationError(err.Error(), string(keel.CodeToolUnavailable), err)
		}
	}

	price, priced := a.Policy.priceOf(in.Model, p.Name(), model)
	maxOut := a.Policy.capTokens(in.MaxTokens)
	// The request's size as the budget and the rate limit see it: its
	// context estimate and the most it may answer.
	toolTokens := keel.EstimateToolTokens(specs)
	prompt := int64(keel.EstimateTokens(in.System, messages) + toolTokens)
	answer := int64(maxOut)
	if answer <= 0 {
		answer = estimatedAnswerTokens
	}
	var reasoning keel.Reasoning
	if in.Reasoning != nil {
		reasoning = *in.Reasoning
		// A thinking budget is output on top of the answer.
		answer += int64(reasoning.BudgetTokens)
	}
	limits := a.Policy.limits(in.Budget)
	if len(limits) > 0 {
		if r := admit(limits, in.Budget, price, priced, in.Model, prompt, answer); r != nil {
			return nil, budgetError(r)
		}
	}

	ctx, hb := a.begin(ctx)
	defer hb.Stop()
	// Rate limits are shared by every worker (docs/contract.md §20.5): the
	// turn waits for its turn before it takes a concurrency slot, which
	// stays this worker's.
	var hold rateHold
	if key, rl, ok := a.Policy.rateKey(in.Model, p.Name(), model); ok || in.Rate != nil {
		var long *RateHold
		if hold, long, err = a.waitTurn(ctx, in, key, rl, prompt+answer); err != nil {
			if ctx.Err() != nil {
				return nil, temporal.NewCanceledError(TurnFailure{Unsent: true})
			}
			return nil, temporal.NewNonRetryableApplicationError("rate limit "+key+": "+err.Error(), string(keel.CodeInternal), err)
		}
		if long != nil {
			return &ModelTurnResult{RateWait: long}, nil
		}
	}
	defer func() {
		if turn != nil {
			hold.settle(turn.Response.Usage.Tokens())
		}
	}()
	release, err := a.slots.acquire(ctx, &a.Policy, p.Name())
	if err != nil {
		hold.giveBack()
		return nil, temporal.NewCanceledError(TurnFailure{Unsent: true})
	}
	defer release()

	req := provider.Request{
		Model: model, System: in.System, Messages: messages, Tools: specs,
		MaxTokens: maxOut, Step: in.Step, Attempt: in.Attempt, OutputSchema: in.OutputSchema,
		Reasoning: reasoning,
	}
	var asm provider.Assembler
	var firstToken time.Duration
	var streamErr error
	for chunk, err := range p.Stream(ctx, req) {
		if err != nil {
			streamErr = err
			break
		}
		if firstToken == 0 && (chunk.Text != "" || chunk.Answer != "" || chunk.Reasoning != "" || chunk.ToolCall != nil) {
			firstToken = time.Since(start)
		}
		asm.Add(chunk)
		a.publishChunk(ctx, in, chunk)
	}
	if streamErr == nil && ctx.Err() != nil {
		streamErr = ctx.Err()
	}
	if streamErr != nil {
		if ctx.Err() != nil {
			// Cancelled (or timed out) while streaming: hand back what was
			// said so far so the workflow can keep it as aborted output.
			return nil, temporal.NewCanceledError(TurnFailure{Usage: a.Policy.bill(asm.Usage(), price, priced), Partial: asm.Text()})
		}
		var mal *provider.MalformedError
		if errors.As(streamErr, &mal) {
			// An unparseable chunk is a malformed response, retried within
			// the turn's budget like any other.
			return nil, turnError(&TurnFailure{Malformed: mal.Reason, Usage: a.Policy.bill(asm.Usage(), price, priced), Partial: asm.Text()})
		}
		return nil, turnError(&TurnFailure{
			Provider: provider.AsProviderError(p.Name(), streamErr), Usage: a.Policy.bill(asm.Usage(), price, priced), Partial: asm.Text(),
		})
	}
	resp, err := asm.Response()
	if err != nil {
		var mal *provider.MalformedError
		if errors.As(err, &mal) {
			return nil, turnError(&TurnFailure{Malformed: mal.Reason, Usage: a.Policy.bill(asm.Usage(), price, priced), Partial: asm.Text()})
		}
		return nil, err
	}
	resp.Usage = a.Policy.bill(resp.Usage, price, priced)
	res := &ModelTurnResult{
		Response: resp,
		Metrics: keel.ModelCallMetrics{
			Model: model, Provider: p.Name(),
			Duration:               keel.Duration(time.Since(start)),
			TimeToFirstToken:       keel.Duration(firstToken),
			InputTokens:            resp.Usage.InputTokens,
			OutputTokens:           resp.Usage.OutputTokens,
			GenerationOutputTokens: resp.Generation,
			FinishReason:           string(resp.Finish),
		},
	}
	res.ToolTokens = toolTokens
	res.MaxSteps = a.Policy.MaxSteps
	res.Limits = limits
	res.Sinks = a.sinkNames()
	for _, c := range resp.ToolCalls {
		plan, ok := plans[c.Name]
		if !ok {
			plan = CallPlan{Available: false}
		}
		res.Calls = append(res.Calls, plan)
	}
	return res, nil
}

func (a *Activities) publishChunk(ctx context.Context, in ModelTurnInput, c provider.Chunk) {
	var ev keel.Event
	switch {
	case c.Text != "":
		ev = keel.TextDelta{Step: in.Step, Attempt: in.Attempt, Text: c.Text}
	case c.Answer != "":
		// A structured answer streams as text: it becomes the text.
		ev = keel.TextDelta{Step: in.Step, Attempt: in.Attempt, Text: c.Answer}
	case c.Reasoning != "":
		ev = keel.ReasoningDelta{Step: in.Step, Attempt: in.Attempt, Text: c.Reasoning}
	case c.ToolCall != nil:
		ev = keel.ToolCallDelta{Step: in.Step, Attempt: in.Attempt, Index: c.ToolCall.Index,
			ID: c.ToolCall.ID, Name: c.ToolCall.Name, Arguments: c.ToolCall.Arguments}
	default:
		return
	}
	a.publishRelayed(ctx, in.SessionID, in.RunID, in.AfterSeq, ev, in.Relay)
}

// toolSpecs returns the specs of the run's tools and how each would run.
// A name this worker does not know is left out of the specs, and calls to it
// come back unavailable.
func (a *Activities) toolSpecs(names []string) ([]keel.ToolSpec, map[string]CallPlan, error) {
	plans := make(map[string]CallPlan, len(names))
	specs := make([]keel.ToolSpec, 0, len(names))
	if a.Tools == nil {
		return nil, plans, nil
	}
	for _, n := range names {
		t, ok := a.Tools.Lookup(n)
		if !ok {
			continue
		}
		plan := CallPlan{Available: true, Traits: tool.TraitsOf(t), Approval: a.Policy.ApprovalFor(n)}
		if plan.Traits.Native == tool.NativeAgent {
			spec, ok := a.Agents[strings.TrimPrefix(n, tool.AgentToolPrefix)]
			if !ok {
				// A delegation tool without its agent: not offered.
				continue
			}
			plan.Agent = &AgentPlan{Spec: spec, Limits: a.Delegation.WithDefaults()}
		}
		specs = append(specs, t.Spec())
		plans[n] = plan
	}
	return specs, plans, nil
}

// turnError wraps a failed attempt as an ApplicationError the workflow can
// decode. It is marked non-retryable for Temporal: the workflow retries.
func turnError(f *TurnFailure) error {
	code, msg := keel.CodeProvider, ""
	if f.Malformed != "" {
		code, msg = keel.CodeMalformedResponse, "malformed response: "+f.Malformed
	} else {
		msg = f.Provider.Error()
	}
	return temporal.NewApplicationErrorWithOptions(msg, string(code), temporal.ApplicationErrorOptions{
		NonRetryable: true,
		Details:      []any{*f},
	})
}
