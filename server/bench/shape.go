package bench

import (
	"context"
	"fmt"
	"time"

	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"
)

// The shaped baseline is bare Temporal in keel's shape, without keel: a
// session workflow started by an update-with-start whose "send" handler
// returns once it started a child run workflow; the run is the bare
// baseline's workflow (a streaming activity per turn with a tool activity
// between them); the session waits for the run to end. It has what keel's design requires of every run (two
// workflows, a child start, an update, the tool call as an activity) and
// nothing keel adds to that (event log, markers, search attributes, state
// signals, heartbeats), so keel ÷ shaped is what keel's own code costs,
// and shaped ÷ bare what the shape costs.
const (
	shapeSessionName = "keel.bench.ShapeSession"
	shapeRunName     = "keel.bench.ShapeRun"
	shapeToolName    = "keel.bench.Tool"
	shapeUpdate      = "send"
)

// shapeSessionWorkflow runs one child per accepted send, one at a time,
// and stays open for more, as a keel session does.
func shapeSessionWorkflow(ctx workflow.Context, in BaselineInput) error {
	accepted, started := 0, 0
	id := workflow.GetInfo(ctx).WorkflowExecution.ID
	runID := func(n int) string { return fmt.Sprintf("%s/run-%d", id, n) }
	err := workflow.SetUpdateHandler(ctx, shapeUpdate, func(ctx workflow.Context) (string, error) {
		accepted++
		n := accepted
		if err := workflow.Await(ctx, func() bool { return started >= n }); err != nil {
			return "", err
		}
		return runID(n), nil
	})
	if err != nil {
		return err
	}
	for runs := 0; ; {
		if err := workflow.Await(ctx, func() bool { return accepted > runs }); err != nil {
			return nil
		}
		runs++
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: runID(runs)})
		fut := workflow.ExecuteChildWorkflow(cctx, shapeRunName, in)
		if err := fut.GetChildWorkflowExecution().Get(ctx, nil); err != nil {
			return err
		}
		started = runs
		_ = fut.Get(ctx, nil) // a cancelled run ends the same way for the session
	}
}

// toolActivity answers at once, as list_files on a small workspace does.
func toolActivity(context.Context) (string, error) { return "notes.txt", nil }

// shapedSession sends one prompt to a new shaped session and waits for its
// run's end; to cancel, it cancels the run while its first turn streams
// (the run, not the session, as keel's benchmark cancels a run).
func (s *stack) shapedSession(ctx context.Context, id string, in BaselineInput, cancel bool) sessionResult {
	t0 := time.Now()
	var runID string
	err := updateWithStart(ctx, s.tc, sdkclient.StartWorkflowOptions{ID: id, TaskQueue: BaselineTaskQueue}, shapeSessionName, in,
		sdkclient.UpdateWorkflowOptions{UpdateName: shapeUpdate, WaitForStage: sdkclient.WorkflowUpdateStageCompleted}, &runID)
	r := sessionResult{start: time.Since(t0), workflows: []execution{{id: id}, {id: runID}}}
	if err != nil {
		r.outcome, r.err = outcomeFailed, fmt.Errorf("send: %w", err)
		return r
	}
	return s.awaitBare(ctx, s.tc.GetWorkflow(ctx, runID, ""), t0, cancel, r)
}
