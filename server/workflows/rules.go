package workflows

import (
	"encoding/json"
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/carry"
	"github.com/keelrun/keel/internal/delegation"
	"github.com/keelrun/keel/server/hook"
)

// Rules are the worker's own checks on what callers send a session: which
// models a run may name, and how large and how many the things they send
// may be. They come from the worker's configuration, never from history,
// and are applied only in update validators, which Temporal runs when an
// update arrives and never on replay: a worker whose rules changed still
// replays every history. A check that a signal handler applies runs on
// replay too, so it must not read Rules (signals apply the defaults of
// api.Limits).
type Rules struct {
	// AdmitModel reports whether the worker offers the model spec a run
	// would use (after the session's defaults are merged in). Optional:
	// nil admits every spec.
	AdmitModel func(spec string) bool
	// ModelOffer describes the models the worker offers, for the message
	// of a refused send. Optional.
	ModelOffer func() string
	// CheckReasoning refuses a reasoning setting that the model a run
	// would use cannot take, with a *keel.Error. Optional: nil leaves
	// it to the run's first model turn.
	CheckReasoning func(spec string, r keel.Reasoning) error
	// CheckInputs refuses attachments of kinds the model a run would use
	// cannot read, with a *keel.Error. Optional: nil leaves it to the
	// model's provider.
	CheckInputs func(spec string, kinds []keel.AttachmentKind) error
	// Limits bound prompts, steering, answers, run configurations, queued
	// prompts and staged steering (docs/contract.md §18). Optional: zero
	// fields take the defaults of api.Limits.
	Limits api.Limits
	// RunBudget and SessionBudget are the operator's ceilings (keel.yaml
	// budgets): a send whose budget asks for more is refused
	// (docs/contract.md §20). The worker's activities hold every request
	// to them as well, whatever the send asked. Optional.
	RunBudget, SessionBudget *api.Budget
	// Agents are the agents the worker offers, by name (docs/contract.md
	// §21.2): a send naming another is refused. A run started as an
	// agent records the agent's spec as it starts (startAgent), so a
	// replay runs the agent the run ran, whatever the worker offers now.
	// Optional.
	Agents map[string]delegation.AgentSpec
	// Hooks are the specs of the hooks the worker offers, by name
	// (docs/contract.md §23): a send naming another is refused. A run
	// records the specs of those it names as it starts (startHooks).
	// Optional.
	Hooks map[string]hook.Spec
	// Sinks are the names of the worker's event sinks, sorted: each
	// execution of a session records them in history as it starts
	// (sinks.go), so a replay delivers to the sinks the execution did.
	// Optional.
	Sinks []string
}

// CheckHooks refuses a run configuration (an agent's hooks applied) that
// names a hook the worker does not offer: at send, and when a schedule is
// made.
func (r Rules) CheckHooks(c api.RunConfig) error {
	if len(c.Hooks) > api.MaxRunHooks {
		return keel.Errorf(keel.CodeInvalidInput, "hooks: at most %d, not %d", api.MaxRunHooks, len(c.Hooks))
	}
	for _, name := range c.Hooks {
		if _, ok := r.Hooks[name]; !ok {
			return keel.Errorf(keel.CodeInvalidInput, "hook %s is not offered by this worker", clip(name, 40))
		}
	}
	return nil
}

// admitsAgent refuses a send that names an agent the worker does not
// offer, or that sets what the agent defines (docs/contract.md §21.2).
// cfg is the run's configuration with the session's defaults merged in;
// only what the send itself sets can clash with its agent.
func (r Rules) admitsAgent(req api.SendRequest, cfg api.RunConfig) *keel.Error {
	if cfg.Agent == "" {
		return nil
	}
	if _, ok := r.Agents[cfg.Agent]; !ok {
		return agentNotOffered(cfg.Agent)
	}
	if c := req.Config; c != nil && c.Agent != "" {
		return agentClash(*c)
	}
	return nil
}

// CheckAgent applies the send validator's agent rules to a run
// configuration as a client wrote it, outside a send: a schedule's, when
// it is made (docs/contract.md §22.2), so that a schedule naming an agent
// the worker does not offer is refused then rather than at every firing.
func (r Rules) CheckAgent(c api.RunConfig) error {
	if c.Agent == "" {
		return nil
	}
	if _, ok := r.Agents[c.Agent]; !ok {
		return agentNotOffered(c.Agent)
	}
	if err := agentClash(c); err != nil {
		return err
	}
	return nil
}

func agentNotOffered(name string) *keel.Error {
	return keel.Errorf(keel.CodeInvalidInput, "agent %s is not offered by this worker", clip(name, 40))
}

// agentClash refuses a configuration that names an agent and sets what
// the agent defines.
func agentClash(c api.RunConfig) *keel.Error {
	if c.Model != "" || c.System != "" || c.Tools != nil || len(c.OutputSchema) > 0 {
		return keel.Errorf(keel.CodeInvalidInput,
			"agent %s defines its model, instructions, tools and output schema: a send that names it sets none of them", c.Agent)
	}
	return nil
}

// admitsBudgets refuses a run configuration whose budgets would raise the
// operator's ceilings.
func (r Rules) admitsBudgets(cfg api.RunConfig) *keel.Error {
	if err := cfg.Budget.Within(r.RunBudget, "budget"); err != nil {
		return err.(*keel.Error)
	}
	if err := cfg.SessionBudget.Within(r.SessionBudget, "session_budget"); err != nil {
		return err.(*keel.Error)
	}
	return nil
}

// admitsModel applies AdmitModel.
func (r Rules) admitsModel(spec string) bool {
	return r.AdmitModel == nil || r.AdmitModel(spec)
}

// admitsReasoning applies CheckReasoning to cfg's model and setting.
func (r Rules) admitsReasoning(cfg api.RunConfig) *keel.Error {
	if cfg.Reasoning == nil || r.CheckReasoning == nil {
		return nil
	}
	err := r.CheckReasoning(cfg.WithDefaults().Model, *cfg.Reasoning)
	if err == nil {
		return nil
	}
	if ke, ok := err.(*keel.Error); ok {
		return ke
	}
	return keel.Errorf(keel.CodeInvalidInput, "reasoning: %v", err)
}

// admitsAttachments checks the attachments of a prompt or a steer: each a
// reference keel takes, and of kinds the model spec can read.
func (r Rules) admitsAttachments(spec string, atts []keel.Attachment) *keel.Error {
	if len(atts) == 0 {
		return nil
	}
	if err := keel.CheckAttachments(atts); err != nil {
		return err.(*keel.Error)
	}
	if r.CheckInputs == nil {
		return nil
	}
	if err := r.CheckInputs(spec, keel.AttachmentKinds(keel.Message{Attachments: atts})); err != nil {
		if ke, ok := err.(*keel.Error); ok {
			return ke
		}
		return keel.Errorf(keel.CodeInvalidInput, "attachments: %v", err)
	}
	return nil
}

// modelRefused is the answer to a send whose model the worker does not
// offer. It is the same whatever the spec: it never says why a spec is
// refused or whether a file of that name exists, and never repeats the
// spec; it may list what the worker offers.
func (r Rules) modelRefused() *keel.Error {
	msg := "model: not offered by this worker"
	if r.ModelOffer != nil {
		msg += "; it offers " + r.ModelOffer()
	}
	return &keel.Error{Code: keel.CodeInvalidInput, Message: msg}
}

// limits returns the limits with their defaults filled in.
func (r Rules) limits() api.Limits { return r.Limits.WithDefaults() }

// Session returns the Session workflow function under these rules, for
// registration as api.SessionWorkflowName.
func (r Rules) Session() func(workflow.Context, carry.SessionInput) (*delegation.DelegationResult, error) {
	return func(ctx workflow.Context, in carry.SessionInput) (*delegation.DelegationResult, error) {
		return sessionWorkflow(ctx, in, r)
	}
}

// checkText refuses an empty text (keel.InvalidInput) or one over limit
// bytes (keel.TooLarge); what names it in the error ("prompt", "steering
// text").
func checkText(what, text string, limit int) error {
	switch {
	case text == "":
		return wireError(keel.Errorf(keel.CodeInvalidInput, "%s is empty", what))
	case len(text) > limit:
		return tooLarge(what, len(text), limit)
	}
	return nil
}

// tooLarge is the error of a value of n bytes over its limit.
func tooLarge(what string, n, limit int) error {
	return wireError(keel.Errorf(keel.CodeTooLarge, "%s is %d bytes; the limit is %d", what, n, limit))
}

// tooMany is the error of a count limit that is full.
func tooMany(format string, a ...any) error {
	e := keel.Errorf(keel.CodeTooMany, format, a...)
	e.Retryable = true
	return wireError(e)
}

// checkConfig refuses a run configuration whose JSON is over limit bytes.
func checkConfig(cfg api.RunConfig, limit int) error {
	b, err := json.Marshal(cfg)
	if err != nil {
		return wireError(keel.Errorf(keel.CodeInvalidInput, "run config: %v", err))
	}
	if len(b) > limit {
		return tooLarge("the run config (as JSON)", len(b), limit)
	}
	return nil
}

// checkQueue refuses a prompt that would queue behind limit others.
func (s *session) checkQueue(req api.SendRequest, limit int) error {
	waiting := len(s.queue) + s.admitting
	if req.IfActive != api.IfActiveQueue || waiting < limit {
		return nil
	}
	return tooMany("%d prompts are queued in session %s; the limit is %d", waiting, s.id, limit)
}

// checkSendLimits applies the worker's limits to a send beyond its
// prompt's size: the merged run configuration's size and the queue's
// length.
func (s *session) checkSendLimits(req api.SendRequest) error {
	lim := s.rules.limits()
	if err := checkConfig(s.defaultsAhead().Merge(req.Config), lim.ConfigBytes); err != nil {
		return err
	}
	return s.checkQueue(req, lim.QueuedPrompts)
}

// checkStaged refuses steering beyond limit staged ones.
func (r *run) checkStaged(limit int) error {
	if n := r.steering.stagedCount(); n >= limit {
		return tooMany("%d steering inputs wait for the next step of run %s; the limit is %d", n, r.in.RunID, limit)
	}
	return nil
}

// checkAnswerSize refuses an answer over limit bytes.
func checkAnswerSize(req api.RespondRequest, limit int) error {
	if len(req.Answer) > limit {
		return tooLarge(fmt.Sprintf("the answer to %q", clip(req.RequestID, 80)), len(req.Answer), limit)
	}
	return nil
}
