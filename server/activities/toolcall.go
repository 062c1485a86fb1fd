package activities

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/server/tool"
)

// Tool runs one tool call. A tool's own failure is a result the model sees
// (status error), not an activity failure; an unknown tool is unavailable;
// a panic is caught and reported as an error result. When the tool asks
// the host a question it has no answer to, the output carries the question
// and the workflow calls again once the host answered.
func (a *Activities) Tool(ctx context.Context, in ToolInput) (result *ToolOutput, err error) {
	start := time.Now()
	ctx, obs := a.observeTool(ctx, in)
	defer func() { obs.end(result, err) }()
	var t tool.Tool
	if a.Tools != nil {
		t, _ = a.Tools.Lookup(in.Call.Name)
	}
	if t == nil {
		return &ToolOutput{Status: keel.ToolUnavailable,
			Output: fmt.Sprintf("tool %q is not available", in.Call.Name)}, nil
	}
	if a.Policy.ApprovalFor(in.Call.Name) == api.ApprovalDeny {
		// The run refuses such calls from the turn's plan; this holds
		// even for a run whose plan predates the policy.
		return &ToolOutput{Status: keel.ToolError,
			Output: fmt.Sprintf("tool %q is denied by this worker's policy", in.Call.Name)}, nil
	}
	ctx, hb := a.begin(ctx)
	defer hb.Stop()

	info := activity.GetInfo(ctx)
	callCtx := tool.WithCall(ctx, tool.CallInfo{
		SessionID: in.SessionID, RunID: in.RunID, ToolCallID: in.Call.ID,
		IdempotencyKey: in.RunID + "/" + in.Call.ID,
		Attempt:        int(info.Attempt),
	}, in.Answers, func(msg string) {
		a.publish(ctx, in.SessionID, in.RunID, in.AfterSeq, keel.ToolProgress{ToolCallID: in.Call.ID, Message: msg})
	})
	var sampling samplingLog
	if in.Model != "" && a.Models != nil {
		callCtx = tool.WithSampler(callCtx, func(ctx context.Context, req tool.SampleRequest) (tool.SampleResult, error) {
			res, u, err := a.sample(ctx, in.Model, req)
			sampling.add(u)
			return res, err
		})
	}
	res, err := callTool(callCtx, t, in.Call)
	out := &ToolOutput{Duration: keel.Duration(time.Since(start)), Sampling: sampling.all()}
	var need *tool.NeedInput
	switch {
	case errors.As(err, &need):
		q := need.Question
		out.NeedInput = &q
		return out, nil
	case ctx.Err() != nil:
		// Cancelled: the workflow already recorded the call as interrupted.
		return nil, temporal.NewCanceledError()
	case err != nil:
		out.Status, out.Output = keel.ToolError, truncateOutput(err.Error())
	case res.IsError:
		out.Status, out.Output = keel.ToolError, truncateOutput(res.Output)
	default:
		out.Status, out.Output = keel.ToolOK, truncateOutput(res.Output)
	}
	if err == nil && len(res.Files) > 0 {
		var notes []string
		out.Attachments, notes = a.storeFiles(ctx, res.Files)
		if len(notes) > 0 {
			out.Output = truncateOutput(strings.TrimSpace(out.Output + "\n" + strings.Join(notes, "\n")))
		}
	}
	return out, nil
}

// callTool runs t, turning a panic into an error result: a broken tool must
// not take its run down.
func callTool(ctx context.Context, t tool.Tool, call keel.ToolCall) (res tool.Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("tool %s panicked: %v", call.Name, r)
		}
	}()
	return t.Call(ctx, call.Arguments)
}
