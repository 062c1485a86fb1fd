package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// MeasureDelegation runs both shapes and the relay, and counts what it
// should: a child start among the delegated run's actions and none among
// the inline run's, every delta at both subscribers. Figures are printed,
// never asserted (docs/performance.md has them).
func TestMeasureDelegation(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := MeasureDelegation(ctx, DelegationOptions{Runs: 2, Deltas: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Inline) != 2 || len(rep.Delegated) != 2 {
		t.Fatalf("run times: %d inline, %d delegated", len(rep.Inline), len(rep.Delegated))
	}
	if rep.InlineByType["command_StartChildWorkflowExecution"] != 0 || rep.DelegatedByType["command_StartChildWorkflowExecution"] != 2 {
		t.Fatalf("child starts: inline %d, delegated %d", rep.InlineByType["command_StartChildWorkflowExecution"],
			rep.DelegatedByType["command_StartChildWorkflowExecution"])
	}
	if len(rep.ToParent) != 20 || len(rep.ToChild) != 20 {
		t.Fatalf("deltas: %d relayed, %d direct, want 20 each", len(rep.ToParent), len(rep.ToChild))
	}
	var out bytes.Buffer
	rep.Print(&out)
	if !strings.Contains(out.String(), "relayed / direct") {
		t.Fatalf("report:\n%s", out.String())
	}
	t.Log("\n" + out.String())
}
