package workflows

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/carry"
	"github.com/keelrun/keel/internal/delegation"
	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/tool"
)

// Delegation (docs/contract.md §21.3): a call of a delegation tool
// (agent__NAME) runs the agent NAME as a child session, a Session workflow
// started as a child workflow of the calling run's execution, with the
// call's task as its one run. The call waits for the child's outcome and
// returns it as the tool result. The run commits only once every child
// has ended (a detached one is cancelled first, as any detached call is),
// so no child outlives the execution that started it, and the execution's
// continue-as-new after the commit finds none running.
//
// Parent close policy: REQUEST_CANCEL. The run itself waits for its
// children before it commits, so the policy acts only when the parent's
// execution closes some other way (terminated by an operator, a workflow
// task failing for good): the children are then cancelled cooperatively,
// each committing its run as cancelled, rather than terminated with no
// terminal event (TERMINATE) or left running without anyone to read their
// answer (ABANDON).

// delegations are a run's children: those running, what they asked the
// host, and what they spent of the run's steps.
type delegations struct {
	// sessionID and runID name the run; depth is its session's depth (0
	// for a client's session) and relay where its session's deltas are
	// relayed (a child's ancestors).
	sessionID, runID string
	depth            int
	relay            []api.RelayTarget
	// shape is the session's (api.SessionInput.Shape), which its children
	// take.
	shape int
	// count is the session's delegations so far: the next child is
	// count+1, so paths never repeat within a session.
	count int
	// running are the children the run waits for.
	running []*childCall
	// steps counts the model turns of the run's ended children, which
	// count against the run's step limit (§21.5).
	steps int
	// requests are the open host-input requests of the running children
	// and their own children, by child path, as each child last reported
	// them (delegation.ChildRequests).
	requests map[string][]api.HostRequest
	// changed is called when requests change; adopt takes the logs an
	// ended child hands back for the event sinks (sinks.go).
	changed func()
	adopt   func([]delegation.SinkLog)
}

// childCall is a running child.
type childCall struct {
	callID, agent, path, sessionID string
}

// delegate runs the child of a delegation call and returns the call's
// result.
func (t *tools) delegate(ctx workflow.Context, s *slot) (keel.ToolStatus, string) {
	plan := s.plan.Agent
	if plan == nil {
		return keel.ToolUnavailable, fmt.Sprintf("tool %q is not available", s.call.Name)
	}
	task, err := tool.ParseAgentTask(s.call.Name, s.call.Arguments)
	if err != nil {
		return keel.ToolError, err.Error()
	}
	prompt := task.Prompt()
	if len(prompt) > api.MaxPromptBytes {
		return keel.ToolError, fmt.Sprintf("the task and its context are %d bytes; the limit is %d", len(prompt), api.MaxPromptBytes)
	}
	lim := plan.Limits.WithDefaults()
	k := t.kids
	if k.depth+1 > lim.Depth {
		return keel.ToolError, fmt.Sprintf("agent %s cannot start: children nest at most %d deep", plan.Spec.Name, lim.Depth)
	}
	// Fan-out: a call past the limit waits for a running child to end.
	if err := workflow.Await(ctx, func() bool { return len(k.running) < lim.FanOut }); err != nil {
		return keel.ToolInterrupted, interruptedOutput
	}
	steps := t.stepsLeft()
	if steps <= 0 {
		return keel.ToolError, fmt.Sprintf("agent %s cannot start: the run has no steps left for it", plan.Spec.Name)
	}
	budget, sessionBudget, ok := t.meter.shares(t.cfg)
	if !ok {
		return keel.ToolError, fmt.Sprintf("agent %s cannot start: the run's budget is spent", plan.Spec.Name)
	}

	k.count++
	path := delegation.ChildPath(plan.Spec.Name, k.count)
	childID := delegation.ChildSessionID(k.sessionID, path, childNonce(ctx))
	t.emit(keel.AgentStarted{ToolCallID: s.call.ID, Agent: plan.Spec.Name, SessionID: childID, Path: path})
	// An agent without a model of its own runs on the parent's; the
	// parent's approvals bind the child too.
	cfg := plan.Spec.Apply(api.RunConfig{Model: t.cfg.Model, Approvals: t.cfg.Approvals, CompactAt: t.cfg.CompactAt,
		ModelTimeout: t.cfg.ModelTimeout, HeartbeatAfter: t.cfg.HeartbeatAfter,
		Budget: budget, SessionBudget: sessionBudget})
	if cfg.MaxSteps <= 0 || cfg.MaxSteps > steps {
		cfg.MaxSteps = steps
	}
	in := carry.SessionInput{SessionID: childID, Config: cfg, Shape: k.shape, Delegated: &api.Delegation{
		Parent: k.sessionID, ParentRun: k.runID, ToolCallID: s.call.ID, Agent: plan.Spec.Name,
		Path: path, Depth: k.depth + 1, Prompt: prompt, Relay: k.relayFor(path, t.lastSeq()),
	}}
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            childID,
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		WaitForCancellation:   true,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		// No KeelState: a lean child never upserts one, so a start value
		// would stay forever, and a child of v0.1.0's shape upserts its
		// own at its run's start. Replay compares a child start by its
		// workflow type only, so this changes nothing for histories
		// already recorded.
		TypedSearchAttributes: temporal.NewSearchAttributes(api.AttrSessionID.ValueSet(childID)),
		StaticSummary:         fmt.Sprintf("agent %s (%s): %s", plan.Spec.Name, path, clip(task.Task, 80)),
		Priority:              temporal.Priority{PriorityKey: api.SessionPriority},
	})
	c := &childCall{callID: s.call.ID, agent: plan.Spec.Name, path: path, sessionID: childID}
	k.running = append(k.running, c)
	fut := workflow.ExecuteChildWorkflow(cctx, api.SessionWorkflowName, in)
	// The child ends on its own after a cancel (WaitForCancellation), so
	// its future is waited for whatever ctx does.
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	startErr := fut.GetChildWorkflowExecution().Get(dctx, nil)
	var res delegation.DelegationResult
	err = fut.Get(dctx, &res)
	k.end(c)
	if k.adopt != nil {
		k.adopt(res.Undelivered)
	}

	o := res.Outcome
	fin := keel.AgentFinished{ToolCallID: s.call.ID, Agent: plan.Spec.Name, SessionID: childID, Path: path,
		Status: o.Status, Steps: o.Steps, Usage: o.UsageTotal, Error: o.Error}
	if err != nil {
		// The child never ran its run (the workflow failed or was
		// terminated, or never started): nothing to count.
		fin.Status, fin.Error = keel.StatusFailed, &keel.Error{Code: keel.CodeInternal, Message: clip(err.Error(), 400)}
		if startErr != nil {
			// Whatever holds the ID, this call did not start it: the log
			// links to no session.
			fin.SessionID = ""
			if temporal.IsWorkflowExecutionAlreadyStartedError(startErr) {
				fin.Error.Message = "its session ID was taken by a workflow this run did not start"
			}
		}
		t.emit(fin)
		if ctx.Err() != nil {
			return keel.ToolInterrupted, interruptedOutput
		}
		return keel.ToolError, fmt.Sprintf("agent %s failed: %s", plan.Spec.Name, fin.Error.Message)
	}
	k.steps += o.Steps
	t.meter.child(s.step, o.UsageTotal, o.Usage)
	t.emit(fin)
	switch o.Status {
	case keel.StatusCompleted:
		if len(o.Answer) > 0 {
			return keel.ToolOK, clipOutput(string(o.Answer))
		}
		return keel.ToolOK, clipOutput(o.Text)
	case keel.StatusCancelled:
		if ctx.Err() != nil {
			return keel.ToolInterrupted, interruptedOutput
		}
		return keel.ToolError, fmt.Sprintf("agent %s was cancelled", plan.Spec.Name)
	}
	msg := "failed"
	if o.Error != nil {
		msg = fmt.Sprintf("failed (%s): %s", o.Error.Code, o.Error.Message)
	}
	return keel.ToolError, fmt.Sprintf("agent %s %s", plan.Spec.Name, msg)
}

// childNonce draws the end of a child's session ID (delegation.ChildSessionID):
// random, so that no one can take the ID before the child starts, and
// recorded in history, so that a replay starts the same child.
func childNonce(ctx workflow.Context) string {
	var nonce string
	_ = workflow.SideEffect(ctx, func(workflow.Context) any {
		b := make([]byte, delegation.ChildNonceBytes)
		_, _ = rand.Read(b) // never fails (crypto/rand)
		return hex.EncodeToString(b)
	}).Get(&nonce)
	return nonce
}

// relayFor is where the child at path relays its deltas: to this run's
// session (ordered after afterSeq, its agent.started), then to each
// session this one relays to, with the path through this one.
func (k *delegations) relayFor(path string, afterSeq int64) []api.RelayTarget {
	out := []api.RelayTarget{{SessionID: k.sessionID, RunID: k.runID, Path: path, AfterSeq: afterSeq}}
	for _, r := range k.relay {
		r.Path += "/" + path
		out = append(out, r)
	}
	return out
}

// end forgets a child that ended, and its requests.
func (k *delegations) end(c *childCall) {
	k.running = slices.DeleteFunc(k.running, func(x *childCall) bool { return x == c })
	if _, ok := k.requests[c.path]; ok {
		delete(k.requests, c.path)
		k.changed()
	}
}

// childRequests takes a child's report of its open requests. A report of
// a child that ended (a late signal) changes nothing.
func (k *delegations) childRequests(sig delegation.ChildRequests) {
	var c *childCall
	for _, x := range k.running {
		if x.path == sig.Path {
			c = x
		}
	}
	if c == nil {
		return
	}
	if k.requests == nil {
		k.requests = map[string][]api.HostRequest{}
	}
	var reqs []api.HostRequest
	for _, r := range sig.Requests {
		// A report names requests by their owner's ID and path below the
		// child; anything else is not from keel's code and is dropped.
		if r.SessionID == "" || !strings.HasPrefix(r.RequestID, r.Path+":") {
			continue
		}
		reqs = append(reqs, r)
	}
	k.requests[c.path] = reqs
	k.changed()
}

// open lists the children's open requests, in the order the children
// started.
func (k *delegations) open() []api.HostRequest {
	var out []api.HostRequest
	for _, c := range k.running {
		out = append(out, k.requests[c.path]...)
	}
	return out
}

// refs lists the running children.
func (k *delegations) refs() []api.ChildRef {
	var out []api.ChildRef
	for _, c := range k.running {
		out = append(out, api.ChildRef{ToolCallID: c.callID, Agent: c.agent, Path: c.path, SessionID: c.sessionID})
	}
	return out
}

// asChild returns the requests of a session as its parent lists them:
// each with the path that names it from the parent (path, then the path
// below it) and the session that owns it.
func asChild(path, sessionID string, own, below []api.HostRequest) []api.HostRequest {
	var out []api.HostRequest
	for _, r := range own {
		r.Path, r.SessionID = path, sessionID
		r.RequestID = path + ":" + r.RequestID
		out = append(out, r)
	}
	for _, r := range below {
		local := strings.TrimPrefix(r.RequestID, r.Path+":")
		r.Path = path + "/" + r.Path
		r.RequestID = r.Path + ":" + local
		out = append(out, r)
	}
	return out
}

// child counts what an ended child spent as the run's own: one
// usage.updated with the child's usage (all its requests, abandoned ones
// included: Requests counts them), outside the model-turn budget
// (attempt 0), and its kept usage as kept (docs/contract.md §21.5).
func (m *meter) child(step int, total, kept keel.Usage) {
	if total.IsZero() {
		return
	}
	m.total = m.total.Add(total)
	m.kept = m.kept.Add(kept)
	m.emit(keel.UsageUpdated{Step: step, Attempt: 0, Usage: total, Total: m.total})
	m.warn(step)
}

// shares returns the budgets a child starts with: what is left of the
// run's budget and of the session's, so that a parent's budget is shared
// by its children (docs/contract.md §21.5). ok is false when either is
// spent.
func (m *meter) shares(cfg api.RunConfig) (run, session *api.Budget, ok bool) {
	run, ok = budgetLeft(cfg.Budget, m.total)
	if !ok {
		return nil, nil, false
	}
	session, ok = budgetLeft(cfg.SessionBudget, m.sessionTotal())
	return run, session, ok
}

// budgetLeft is what is left of b once spent is spent.
func budgetLeft(b *api.Budget, spent keel.Usage) (*api.Budget, bool) {
	if b.IsZero() {
		return nil, true
	}
	left := *b
	if b.Max > 0 {
		n := b.MaxNanos() - spent.Cost.In(b.Currency)
		if n <= 0 {
			return nil, false
		}
		left.Max = float64(n) / 1e9
	}
	if b.MaxTokens > 0 {
		n := b.MaxTokens - spent.Tokens()
		if n <= 0 {
			return nil, false
		}
		left.MaxTokens = n
	}
	return &left, true
}

// clipOutput cuts a child's answer to what any tool's output may be
// (activities.MaxToolOutput), at a character boundary: the whole answer
// stays in the child's log.
func clipOutput(s string) string {
	if len(s) <= activities.MaxToolOutput {
		return s
	}
	n := activities.MaxToolOutput
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + fmt.Sprintf("\n[answer cut: %d more bytes; the child's log has all of it]", len(s)-n)
}
