package workflows

import (
	"errors"

	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/ratelimit"
)

// RateLimitWorkflow holds the pace of one rate limit for every worker
// (docs/contract.md §20.5): its UpdateRate update reserves requests and
// tokens and answers how long each waits, and takes reservations back.
// It never waits itself (the asker waits, heartbeating), so it has no
// timers and sleeps between updates. After ratelimit.RateUpdatesPerRun updates,
// or when Temporal suggests it, it continues as new with its state, once
// its handlers finished.
func RateLimitWorkflow(ctx workflow.Context, in ratelimit.RateLimitInput) error {
	if err := ratelimit.ValidateRateKey(in.Key); err != nil {
		return wireError(asKeelError(err))
	}
	st := in.State
	pace := ratePace{st: &st}
	updates := 0
	if err := workflow.SetQueryHandler(ctx, api.QueryState, func() (ratelimit.RateLimitStatus, error) {
		return ratelimit.RateLimitStatus{Key: in.Key, Requests: st.Requests, Tokens: st.Tokens, Held: len(st.Held), Updates: updates}, nil
	}); err != nil {
		return err
	}
	err := workflow.SetUpdateHandlerWithOptions(ctx, ratelimit.UpdateRate,
		func(ctx workflow.Context, req ratelimit.RateRequest) (ratelimit.RateGrant, error) {
			updates++
			now := workflow.Now(ctx)
			pace.expire(now)
			for _, g := range req.GiveBack {
				pace.giveBack(now, g)
			}
			grant := ratelimit.RateGrant{Waits: make([]keel.Duration, len(req.Reserve))}
			for i, r := range req.Reserve {
				grant.Waits[i] = keel.Duration(pace.reserve(now, req.Limit, r))
			}
			return grant, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(req ratelimit.RateRequest) error {
			if err := req.Validate(); err != nil {
				return wireError(asKeelError(err))
			}
			return nil
		}})
	if err != nil {
		return err
	}
	if err := workflow.Await(ctx, func() bool {
		return updates >= ratelimit.RateUpdatesPerRun || workflow.GetInfo(ctx).GetContinueAsNewSuggested()
	}); err != nil {
		return err
	}
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return err
	}
	return workflow.NewContinueAsNewError(ctx, ratelimit.RateLimitWorkflowName, ratelimit.RateLimitInput{Key: in.Key, State: st})
}

// asKeelError returns err as a *keel.Error (the validations of package
// api return them).
func asKeelError(err error) *keel.Error {
	var ke *keel.Error
	if errors.As(err, &ke) {
		return ke
	}
	return &keel.Error{Code: keel.CodeInvalidInput, Message: err.Error()}
}
