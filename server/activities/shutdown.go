package activities

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
)

// Lifecycle reaches the workflows of a whole namespace: it finds running
// sessions, and those running a run, and signals them. The worker implements it with the
// Temporal client.
type Lifecycle interface {
	// ActiveRuns returns the IDs of the sessions in the middle of a run. A
	// cancel signal to one cancels that run.
	ActiveRuns(ctx context.Context) ([]string, error)
	// Sessions returns the IDs of running Session workflows.
	Sessions(ctx context.Context) ([]string, error)
	// Signal sends a signal without payload to a running workflow.
	Signal(ctx context.Context, workflowID, name string) error
	// ShutDown reports whether the runtime was shut down.
	ShutDown(ctx context.Context) (bool, error)
}

// Shutdown tells every running session that keel is shut down; each one
// cancels its active run and refuses new prompts. It reports the runs that
// were active. Signals are idempotent, so a retried attempt is harmless.
func (a *Activities) Shutdown(ctx context.Context) (*ShutdownResult, error) {
	if a.Lifecycle == nil {
		return nil, temporal.NewNonRetryableApplicationError("no lifecycle configured", string(keel.CodeInternal), nil)
	}
	runs, err := a.Lifecycle.ActiveRuns(ctx)
	if err != nil {
		return nil, fmt.Errorf("list active runs: %w", err)
	}
	sessions, err := a.Lifecycle.Sessions(ctx)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	for _, id := range sessions {
		if err := a.Lifecycle.Signal(ctx, id, api.SignalShutdown); err != nil {
			return nil, fmt.Errorf("signal session %s: %w", id, err)
		}
	}
	// A run found running whose session was not listed yet (visibility
	// lags a little) still gets cancelled directly.
	for _, id := range runs {
		if err := a.Lifecycle.Signal(ctx, id, api.SignalCancel); err != nil {
			return nil, fmt.Errorf("cancel run %s: %w", id, err)
		}
	}
	return &ShutdownResult{Cancelled: len(runs)}, nil
}

// RuntimeState reports whether keel is shut down.
func (a *Activities) RuntimeState(ctx context.Context) (bool, error) {
	if a.Lifecycle == nil {
		return false, nil
	}
	return a.Lifecycle.ShutDown(ctx)
}
