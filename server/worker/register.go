package worker

import (
	"maps"
	"slices"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/ratelimit"
	"github.com/keelrun/keel/internal/schedreg"
	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/hook"
	"github.com/keelrun/keel/server/workflows"
)

// This file is the worker's only use of package workflows: a worker hosts
// keel's workflow code, so it registers it. Everything else the worker
// needs of the contract (names, queries, search attributes) comes from api.

// Registrar is where workflows and activities are registered: a worker, a
// replayer, or the Temporal test environment. (Not to be confused with
// tool.Registry, the tools a worker offers.)
type Registrar interface {
	RegisterWorkflowWithOptions(w any, options workflow.RegisterOptions)
	RegisterActivityWithOptions(a any, options activity.RegisterOptions)
}

// Register registers keel's workflows and acts on r under their stable
// names, each workflow with its versioning behavior (deployment.go), which
// only a versioned worker acts on. The workflows apply no worker rules: a
// replayer needs none (validators do not run on replay).
func Register(r Registrar, acts *activities.Activities) {
	RegisterWithRules(r, acts, workflows.Rules{})
}

// RegisterWithRules is Register with the worker's rules on what callers
// send (workflows.Rules), applied in the workflows' update validators.
// worker.New registers under the rules of its model catalogue
// (modelRules).
func RegisterWithRules(r Registrar, acts *activities.Activities, rules workflows.Rules) {
	r.RegisterWorkflowWithOptions(rules.Session(), workflow.RegisterOptions{Name: api.SessionWorkflowName,
		VersioningBehavior: sessionVersioning})
	r.RegisterActivityWithOptions(acts.ModelTurn, activity.RegisterOptions{Name: activities.ModelTurnName})
	r.RegisterActivityWithOptions(acts.Tool, activity.RegisterOptions{Name: activities.ToolName})
	r.RegisterActivityWithOptions(acts.Compact, activity.RegisterOptions{Name: activities.CompactName})
	r.RegisterActivityWithOptions(acts.Hook, activity.RegisterOptions{Name: activities.HookName})
	r.RegisterWorkflowWithOptions(workflows.RuntimeWorkflow, workflow.RegisterOptions{Name: api.RuntimeWorkflowName,
		VersioningBehavior: runtimeVersioning})
	r.RegisterWorkflowWithOptions(workflows.RateLimitWorkflow, workflow.RegisterOptions{Name: ratelimit.RateLimitWorkflowName,
		VersioningBehavior: rateLimitVersioning})
	r.RegisterActivityWithOptions(acts.Shutdown, activity.RegisterOptions{Name: activities.ShutdownName})
	r.RegisterActivityWithOptions(acts.RuntimeState, activity.RegisterOptions{Name: activities.RuntimeStateName})
	r.RegisterActivityWithOptions(acts.StoreEvents, activity.RegisterOptions{Name: activities.StoreEventsName})
	r.RegisterActivityWithOptions(acts.DeliverEvents, activity.RegisterOptions{Name: activities.DeliverEventsName})
	// A schedule's firing (docs/contract.md §22); its activities need a
	// Temporal client, so New registers them (registerSchedules).
	r.RegisterWorkflowWithOptions(workflows.ScheduledSendWorkflow, workflow.RegisterOptions{
		Name: api.ScheduledSendWorkflowName, VersioningBehavior: scheduledSendVersioning})
	r.RegisterActivityWithOptions(acts.RateGiveBack, activity.RegisterOptions{Name: activities.RateGiveBackName})
	r.RegisterWorkflowWithOptions(workflows.ScheduleRegistryWorkflow, workflow.RegisterOptions{
		Name: schedreg.ScheduleRegistryWorkflowName, VersioningBehavior: scheduleRegistryVersioning})
	// An eval (docs/contract.md §24); its activities need a Temporal
	// client, so New registers them (registerEvals).
	r.RegisterWorkflowWithOptions(workflows.EvalWorkflow, workflow.RegisterOptions{
		Name: api.EvalWorkflowName, VersioningBehavior: evalVersioning})
}

// rules are the workflows' rules that a worker with opts applies: its
// limits, and, when its models are a Catalog (Models is), the models it
// refuses at send; any other resolver admits every spec and decides at the
// run's first model turn.
func (o Options) rules(models activities.ModelResolver) workflows.Rules {
	r := workflows.Rules{Limits: o.Limits, RunBudget: o.Policy.RunBudget, SessionBudget: o.Policy.SessionBudget,
		Agents: o.Agents, Hooks: hookSpecs(o.Hooks), Sinks: slices.Sorted(maps.Keys(o.Sinks))}
	if c, ok := models.(Catalog); ok {
		r.AdmitModel, r.ModelOffer = c.Admits, c.Offer
		if m, ok := c.(*Models); ok {
			r.CheckReasoning, r.CheckInputs = m.CheckReasoning, m.CheckInputs
		}
	}
	return r
}

// scheduleRulesOf are the rules that a schedule's firing applies
// (schedule.go): the same as the session's send validators apply, and
// the worker's schedule limits.
func scheduleRulesOf(r workflows.Rules, quota schedreg.ScheduleLimits) scheduleRules {
	return scheduleRules{admitModel: r.AdmitModel, modelOffer: r.ModelOffer, checkReasoning: r.CheckReasoning, limits: r.Limits,
		runBudget: r.RunBudget, sessionBudget: r.SessionBudget, checkAgent: r.CheckAgent, checkHooks: r.CheckHooks, quota: quota}
}

// hookSpecs are the specs of the worker's hooks, by name.
func hookSpecs(hooks map[string]hook.Hook) map[string]hook.Spec {
	if len(hooks) == 0 {
		return nil
	}
	specs := make(map[string]hook.Spec, len(hooks))
	for name, h := range hooks {
		specs[name] = h.Spec()
	}
	return specs
}
