package bench

import (
	"context"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
)

// HistoryFigures sum the histories of a measurement's runs.
type HistoryFigures struct {
	// Runs is the number of completed runs, whose histories the figures
	// below sum; Steps is the number of steps (model turns, or the
	// baseline's activities) in each.
	Runs, Steps int
	// Workflows sums each kind of workflow of a run ("Session", "Run";
	// the baseline's "Workflow"), in order.
	Workflows []WorkflowHistory
	// Events counts their events by type ("MarkerRecorded").
	Events Counts
	// StreamActivities counts the streaming activities that started and
	// closed in the histories of every run, cancelled ones too, and
	// StreamTime sums how long they ran, from start to close.
	StreamActivities int64
	StreamTime       time.Duration
}

// WorkflowHistory sums one kind of workflow's histories over the runs.
type WorkflowHistory struct {
	Kind string
	// Events and WorkflowTasks (WorkflowTaskCompleted events) over all
	// runs.
	Events, WorkflowTasks int64
}

// EventsPerRun is the mean number of history events of a run, all its
// workflows together.
func (h HistoryFigures) EventsPerRun() float64 {
	var sum int64
	for _, w := range h.Workflows {
		sum += w.Events
	}
	return per(sum, h.Runs)
}

// WorkflowTasksPerStep is the mean number of workflow tasks completed per
// step, all of a run's workflows together.
func (h HistoryFigures) WorkflowTasksPerStep() float64 {
	var sum int64
	for _, w := range h.Workflows {
		sum += w.WorkflowTasks
	}
	return per(sum, h.Runs*h.Steps)
}

func per(sum int64, n int) float64 {
	if n <= 0 {
		return 0
	}
	return float64(sum) / float64(n)
}

// historyRun is a run whose histories are read: its executions in the
// order of the kinds, and whether it completed.
type historyRun struct {
	executions []execution
	completed  bool
}

// historyReaders bounds the histories read at once.
const historyReaders = 8

// histories reads the workflows of each run and sums them: the figures of
// the completed runs, and the run time of the activities of type
// streamActivity in all of them.
func (s *stack) histories(ctx context.Context, runs []historyRun, kinds []string, steps int, streamActivity string) (HistoryFigures, error) {
	h := HistoryFigures{Steps: steps, Events: Counts{}}
	for _, k := range kinds {
		h.Workflows = append(h.Workflows, WorkflowHistory{Kind: k})
	}
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
		sem      = make(chan struct{}, historyReaders)
	)
	for _, run := range runs {
		if run.completed {
			h.Runs++
		}
		for j, e := range run.executions {
			if j >= len(kinds) {
				break
			}
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				r, err := s.readHistory(ctx, e, streamActivity)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					if firstErr == nil {
						firstErr = err
					}
					return
				}
				h.StreamActivities += r.activities
				h.StreamTime += r.activityTime
				if !run.completed {
					return
				}
				for t, n := range r.events {
					h.Events[t] += n
					h.Workflows[j].Events += n
				}
				h.Workflows[j].WorkflowTasks += r.events[enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED.String()]
			}()
		}
	}
	wg.Wait()
	return h, firstErr
}

// historyRead is what one workflow's history holds.
type historyRead struct {
	// events by type
	events Counts
	// activities of the streaming type that started and closed, and their
	// time from start to close
	activities   int64
	activityTime time.Duration
}

// readHistory counts an execution's history events by type and times the
// activities of type activityType.
func (s *stack) readHistory(ctx context.Context, e execution, activityType string) (historyRead, error) {
	r := historyRead{events: Counts{}}
	it := s.tc.GetWorkflowHistory(ctx, e.id, e.runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	streaming := map[int64]bool{}    // scheduled event ID → of activityType
	started := map[int64]time.Time{} // scheduled event ID → started at
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return r, err
		}
		r.events[ev.GetEventType().String()]++
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == activityType {
			streaming[ev.GetEventId()] = true
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil && streaming[a.GetScheduledEventId()] {
			started[a.GetScheduledEventId()] = ev.GetEventTime().AsTime()
		}
		if id, ok := activityClosed(ev); ok {
			if t, ok := started[id]; ok {
				r.activities++
				r.activityTime += ev.GetEventTime().AsTime().Sub(t)
			}
		}
	}
	return r, nil
}

// activityClosed returns the scheduled event ID of the activity an event
// closes, if it closes one.
func activityClosed(ev *historypb.HistoryEvent) (int64, bool) {
	switch {
	case ev.GetActivityTaskCompletedEventAttributes() != nil:
		return ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId(), true
	case ev.GetActivityTaskFailedEventAttributes() != nil:
		return ev.GetActivityTaskFailedEventAttributes().GetScheduledEventId(), true
	case ev.GetActivityTaskCanceledEventAttributes() != nil:
		return ev.GetActivityTaskCanceledEventAttributes().GetScheduledEventId(), true
	case ev.GetActivityTaskTimedOutEventAttributes() != nil:
		return ev.GetActivityTaskTimedOutEventAttributes().GetScheduledEventId(), true
	}
	return 0, false
}
