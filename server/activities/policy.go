package activities

import (
	"context"
	"path"
	"sync"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
)

// Policy is what a worker's operator decided for every run the worker
// serves (keel.yaml's approvals and limits). It is applied on top of each
// run's own configuration, never loosening it: the stricter approval wins,
// and limits cap what a run asks for.
type Policy struct {
	// Approvals sets a policy per tool name or path.Match pattern
	// ("mcp__*", "*"). A name matches itself first, then the longest
	// matching pattern. Optional: no entry leaves the run's policy.
	Approvals map[string]api.Approval
	// MaxSteps caps the model turns of a run. Optional; 0: no cap.
	MaxSteps int
	// MaxTokens caps each model response. Optional; 0: no cap.
	MaxTokens int
	// Concurrency caps the model requests in flight on this worker per
	// provider name ("openai", "anthropic", "scripted"); a turn waits for
	// a free slot, heartbeating. Optional; a missing provider is not
	// limited.
	Concurrency map[string]int
	// Prices are what a request costs, per model spec (a keel.yaml
	// model's name or "provider:model"): docs/contract.md §20. A model
	// without one is counted in tokens only.
	Prices map[string]keel.Price
	// RunBudget and SessionBudget are the operator's ceilings: every run
	// is held to them, whatever its own budget says. Optional.
	RunBudget, SessionBudget *api.Budget
	// RateLimits pace model requests on this worker per provider name,
	// "provider:model" or model spec (the most specific wins): requests
	// and tokens per minute, shared by every run the worker serves. A
	// request waits for its turn, heartbeating, before it takes a
	// Concurrency slot. Optional.
	RateLimits map[string]RateLimit
}

// ApprovalFor returns the worker's approval policy for the tool name, or
// "" when the worker has none.
func (p *Policy) ApprovalFor(name string) api.Approval {
	if a, ok := p.Approvals[name]; ok {
		return a
	}
	best, found := "", api.Approval("")
	for pattern, a := range p.Approvals {
		if ok, _ := path.Match(pattern, name); !ok {
			continue
		}
		// The longest pattern is the most specific; ties go to the
		// lexically first, so the answer never depends on map order.
		if found == "" || len(pattern) > len(best) || (len(pattern) == len(best) && pattern < best) {
			best, found = pattern, a
		}
	}
	return found
}

// capTokens returns the response cap a request should carry.
func (p *Policy) capTokens(asked int) int {
	if p.MaxTokens > 0 && (asked <= 0 || asked > p.MaxTokens) {
		return p.MaxTokens
	}
	return asked
}

// slots are the per-provider semaphores of Policy.Concurrency.
type slots struct {
	once sync.Once
	sems map[string]chan struct{}
}

// acquire takes a slot for provider, waiting until one is free or ctx
// ends; the returned function gives it back.
func (s *slots) acquire(ctx context.Context, p *Policy, provider string) (func(), error) {
	s.once.Do(func() {
		s.sems = map[string]chan struct{}{}
		for name, n := range p.Concurrency {
			if n > 0 {
				s.sems[name] = make(chan struct{}, n)
			}
		}
	})
	sem, ok := s.sems[provider]
	if !ok {
		return func() {}, nil
	}
	select {
	case sem <- struct{}{}:
		return func() { <-sem }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
