package bench

import (
	"context"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/activity"
	sdkclient "go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/server/activities"
)

// Phases splits back-to-back activity steps by where their time went, as
// the server's own history timestamps tell it, one sample a step:
//
//   - Dispatch: from the activity's scheduling to a worker starting it;
//   - Activity: from its start to the server recording its completion
//     (the work, the worker's code around it and the completion call);
//   - Wake: from the completion to a worker starting the workflow task
//     it scheduled;
//   - Decide: that workflow task, from its start to its completion (the
//     workflow code and the completion call);
//   - Rest: the rest of the step up to the next activity's scheduling
//     (further workflow tasks, when a step takes more than one).
type Phases struct {
	Dispatch, Activity, Wake, Decide, Rest, Step Latencies
}

// StepPhases reads the phases of every step of h whose activity is named
// activityType and is followed by another such activity.
func StepPhases(h *historypb.History, activityType string) Phases {
	var p Phases
	evs := h.GetEvents()
	at := func(e *historypb.HistoryEvent) time.Time { return e.GetEventTime().AsTime() }
	var sched []int
	for i, e := range evs {
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == activityType {
			sched = append(sched, i)
		}
	}
	for k := 0; k+1 < len(sched); k++ {
		i, next := sched[k], sched[k+1]
		id := evs[i].GetEventId()
		var started, completed, wftStarted, wftCompleted *historypb.HistoryEvent
		for _, e := range evs[i+1 : next] {
			switch {
			case e.GetActivityTaskStartedEventAttributes().GetScheduledEventId() == id:
				started = e
			case e.GetActivityTaskCompletedEventAttributes().GetScheduledEventId() == id:
				completed = e
			case completed != nil && wftStarted == nil && e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
				wftStarted = e
			case wftStarted != nil && wftCompleted == nil && e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
				wftCompleted = e
			}
		}
		if started == nil || completed == nil || wftStarted == nil || wftCompleted == nil {
			continue // a retried or cancelled step: not a back-to-back one
		}
		p.Dispatch = append(p.Dispatch, at(started).Sub(at(evs[i])))
		p.Activity = append(p.Activity, at(completed).Sub(at(started)))
		p.Wake = append(p.Wake, at(wftStarted).Sub(at(completed)))
		p.Decide = append(p.Decide, at(wftCompleted).Sub(at(wftStarted)))
		p.Rest = append(p.Rest, at(evs[next]).Sub(at(wftCompleted)))
		p.Step = append(p.Step, at(evs[next]).Sub(at(evs[i])))
	}
	return p
}

// Add appends q's samples to p's.
func (p *Phases) Add(q Phases) {
	p.Dispatch = append(p.Dispatch, q.Dispatch...)
	p.Activity = append(p.Activity, q.Activity...)
	p.Wake = append(p.Wake, q.Wake...)
	p.Decide = append(p.Decide, q.Decide...)
	p.Rest = append(p.Rest, q.Rest...)
	p.Step = append(p.Step, q.Step...)
}

// MeasureKeelStepPhases runs `runs` keel runs of n model steps through c
// (whose worker resolves models as MeasureSteps says) and reads the
// phases of their steps from each run's execution.
func MeasureKeelStepPhases(ctx context.Context, c *client.Client, runs, n int) (Phases, error) {
	var all Phases
	for i := range runs {
		run, err := runSteps(ctx, c, fmt.Sprintf("phases %d %d", time.Now().UnixNano(), i), n, nil)
		if err != nil {
			return all, err
		}
		h, err := runExecutionHistory(ctx, c.Temporal(), run.Session().ID())
		if err != nil {
			return all, err
		}
		all.Add(StepPhases(h, activities.ModelTurnName))
	}
	return all, nil
}

// runExecutionHistory reads the history of a session's first
// execution, which ran its run 1: the execution that the current one
// continued from (the run's outcome is read from that continue-as-new, so
// it has happened once Outcome returned).
func runExecutionHistory(ctx context.Context, tc sdkclient.Client, sessionID string) (*historypb.History, error) {
	cur, err := readHistory(ctx, tc, sessionID, "")
	if err != nil {
		return nil, err
	}
	first := cur.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId()
	if first == "" {
		return nil, fmt.Errorf("bench: session %s did not move on after its run", sessionID)
	}
	return readHistory(ctx, tc, sessionID, first)
}

func readHistory(ctx context.Context, tc sdkclient.Client, workflowID, runID string) (*historypb.History, error) {
	it := tc.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return nil, err
		}
		h.Events = append(h.Events, e)
	}
	return h, nil
}

// MeasureBareStepPhases runs a bare workflow of n+1 no-op activities in
// sequence (as MeasureActivityRoundTrip) and reads the phases of its n
// steps from its history.
func MeasureBareStepPhases(ctx context.Context, tc sdkclient.Client, n int) (Phases, error) {
	tq := uniqueName("probe-phases")
	w := sdkworker.New(tc, tq, sdkworker.Options{})
	w.RegisterWorkflowWithOptions(activityLoopWorkflow, workflow.RegisterOptions{Name: probeActivityLoop})
	w.RegisterActivityWithOptions(func(context.Context) error { return nil }, activity.RegisterOptions{Name: probeNoop})
	if err := w.Start(); err != nil {
		return Phases{}, fmt.Errorf("bench: probe worker: %w", err)
	}
	defer w.Stop()
	id := uniqueName("probe-phases")
	run, err := tc.ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{ID: id, TaskQueue: tq}, probeActivityLoop, n+1)
	if err != nil {
		return Phases{}, fmt.Errorf("bench: start probe workflow: %w", err)
	}
	if err := run.Get(ctx, nil); err != nil {
		return Phases{}, fmt.Errorf("bench: probe workflow: %w", err)
	}
	h, err := readHistory(ctx, tc, id, run.GetRunID())
	if err != nil {
		return Phases{}, err
	}
	return StepPhases(h, probeNoop), nil
}
