package activities

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/keelrun/keel"
)

// RecoverRun reads back the durable events a Run workflow recorded after
// AfterSeq. The Session workflow uses it when a run ended without returning
// them (terminated by an operator, failed in workflow code), so the session
// log stays dense before it records the run's failure.
func (a *Activities) RecoverRun(ctx context.Context, in RecoverRunInput) (*RecoverRunResult, error) {
	if a.Runs == nil {
		return nil, temporal.NewNonRetryableApplicationError("no run reader configured", string(keel.CodeInternal), nil)
	}
	evs, err := a.Runs.Events(ctx, in.WorkflowID, in.RunID, in.AfterSeq)
	if err != nil {
		return nil, fmt.Errorf("read events of %s: %w", in.WorkflowID, err)
	}
	return &RecoverRunResult{Events: evs}, nil
}
