package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/delegation"
)

// A session's defaults (SessionInput.Config) are what a send's own run
// config leaves unset. The client that creates the session sets them; a
// send's config applies to its run only, unless the send asks to change
// the defaults (SendRequest.SetDefault). Such a send changes them when
// its run starts, so prompts queued ahead of it run under the defaults
// they were sent under, and those behind it under the new ones
// (docs/contract.md §11.6).

// startConfig returns the configuration of the run p starts: the
// session's defaults with p's own config over them, after p, if it sets
// the defaults, has made its config theirs.
//
// A run that names an agent takes the agent's spec, which the worker
// resolves as the run starts and history records (startAgent).
func (s *session) startConfig(ctx workflow.Context, p *pendingRun) (api.RunConfig, *keel.Error) {
	if p.req.SetDefault && p.req.Config != nil {
		s.cfg = s.cfg.Merge(p.req.Config)
	}
	cfg := s.cfg.Merge(p.req.Config)
	if cfg.Agent == "" {
		return cfg.WithDefaults(), nil
	}
	spec, err := s.startAgent(ctx, cfg.Agent)
	if err != nil {
		return cfg.WithDefaults(), err
	}
	return spec.Apply(cfg).WithDefaults(), nil
}

// startAgent resolves the agent a run starts as from the worker's agents
// (Rules.Agents) in a side effect, so history records the spec the run
// ran and a replay takes it from there, whatever the worker offers by
// then. Runs that name no agent record nothing.
func (s *session) startAgent(ctx workflow.Context, name string) (delegation.AgentSpec, *keel.Error) {
	type record struct {
		Spec *delegation.AgentSpec `json:"spec"`
	}
	// The side effect returns its own value, and Get decodes into another:
	// decoding into the value it returned would write into the slices it
	// shares with the worker's rules, which other sessions read at once.
	enc := workflow.SideEffect(ctx, func(workflow.Context) any {
		var r record
		if a, ok := s.rules.Agents[name]; ok {
			r.Spec = &a
		}
		return r
	})
	var found record
	if err := enc.Get(&found); err != nil || found.Spec == nil {
		// Accepted at send, gone by the start (a worker redeployed
		// without it while the prompt was queued).
		return delegation.AgentSpec{}, keel.Errorf(keel.CodeInvalidInput, "agent %s is no longer offered by this worker", clip(name, 40))
	}
	return *found.Spec, nil
}

// defaultsAhead returns the defaults a prompt sent now would run under:
// the session's, changed by the queued sends that set them, in queue
// order. A send is validated against them, so that what a queued send
// will make the default is checked for every prompt behind it.
func (s *session) defaultsAhead() api.RunConfig {
	cfg := s.cfg
	for _, p := range s.queue {
		if p.req.SetDefault {
			cfg = cfg.Merge(p.req.Config)
		}
	}
	return cfg
}

// validateSetDefault refuses a send that asks to change the defaults
// without saying to what.
func validateSetDefault(req api.SendRequest) error {
	if req.SetDefault && req.Config == nil {
		return wireError(keel.Errorf(keel.CodeInvalidInput, "set_default needs a run config to make the session's default"))
	}
	return nil
}
