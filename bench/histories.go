package bench

import (
	"context"
	"sync"

	enumspb "go.temporal.io/api/enums/v1"
)

// HistoryFigures sum the histories of a measurement's completed runs.
type HistoryFigures struct {
	// Runs is the number of runs whose histories were read; Steps is the
	// number of steps (model turns, or the baseline's activities) in each.
	Runs, Steps int
	// Workflows sums each kind of workflow of a run ("Session", "Run";
	// the baseline's "Workflow"), in order.
	Workflows []WorkflowHistory
	// Events counts their events by type ("MarkerRecorded").
	Events Counts
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

// historyReaders bounds the histories read at once.
const historyReaders = 8

// histories reads the workflows of each run (runs[i][j] is run i's
// workflow of kind kinds[j]) and sums them.
func (s *stack) histories(ctx context.Context, runs [][]string, kinds []string, steps int) (HistoryFigures, error) {
	h := HistoryFigures{Runs: len(runs), Steps: steps, Events: Counts{}}
	for _, k := range kinds {
		h.Workflows = append(h.Workflows, WorkflowHistory{Kind: k})
	}
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
		sem      = make(chan struct{}, historyReaders)
	)
	for _, ids := range runs {
		for j, id := range ids {
			if j >= len(kinds) {
				break
			}
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				events, err := s.historyEvents(ctx, id)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					if firstErr == nil {
						firstErr = err
					}
					return
				}
				for t, n := range events {
					h.Events[t] += n
					h.Workflows[j].Events += n
				}
				h.Workflows[j].WorkflowTasks += events[enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED.String()]
			}()
		}
	}
	wg.Wait()
	return h, firstErr
}

// historyEvents counts a workflow's history events by type.
func (s *stack) historyEvents(ctx context.Context, id string) (Counts, error) {
	it := s.tc.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	out := Counts{}
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, err
		}
		out[ev.GetEventType().String()]++
	}
	return out, nil
}
