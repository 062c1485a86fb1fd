package bench

import (
	"context"
	"fmt"
	"sort"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
)

// LatencyScript streams many small deltas over a few steps, each with a
// tool call, so a run yields both kinds of event.
const LatencyScript = `{"chunk_delay":"3ms","turns":[
  {"text":["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q","r","s","t"],
   "tool_calls":[{"id":"t1","name":"noop","arguments":{}}]},
  {"text":["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q","r","s","t"],
   "tool_calls":[{"id":"t2","name":"noop","arguments":{}}]},
  {"text":["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q","r","s","t"]}]}`

// EventLatency holds what MeasureEventLatency saw.
type EventLatency struct {
	// Deltas: from the provider chunk in the activity (the envelope's At,
	// stamped when the activity publishes it) to the client's loop body.
	Deltas Latencies
	// Durable: from the commit of the event (the completion of the
	// workflow task that recorded it, read from the run's history) to the
	// client's loop body.
	Durable Latencies
	// DurableFromTask: from the start of that workflow task (the event's
	// At) to the client: adds the worker's processing of the task.
	DurableFromTask Latencies
}

// MeasureEventLatency runs `runs` runs of model (which must play
// LatencyScript, with the noop tool offered) and times every event the
// client receives. Worker and client must be different Temporal and live
// connections for the figure to mean "another process".
func MeasureEventLatency(ctx context.Context, c *client.Client, model string, runs int) (EventLatency, error) {
	var out EventLatency
	for i := range runs {
		run, err := c.NewSession().Send(ctx, fmt.Sprintf("latency %d", i),
			client.WithConfig(api.RunConfig{Model: model, Tools: []string{"noop"}}))
		if err != nil {
			return out, err
		}
		type seen struct{ at, got time.Time }
		var durable []seen
		for env, err := range run.Events(ctx) {
			now := time.Now()
			if err != nil {
				return out, err
			}
			if env.Durable() {
				durable = append(durable, seen{env.At, now})
			} else if env.Type == keel.TypeTextDelta {
				out.Deltas = append(out.Deltas, now.Sub(env.At))
			}
		}
		// A fresh session's run is its first execution.
		desc, err := c.Temporal().DescribeWorkflowExecution(ctx, run.Session().ID(), "")
		if err != nil {
			return out, err
		}
		commits, err := taskCompletions(ctx, c, run.Session().ID(), desc.GetWorkflowExecutionInfo().GetFirstRunId())
		if err != nil {
			return out, err
		}
		for _, d := range durable {
			// The event was committed by the first workflow task that
			// completed at or after the task it was recorded in started.
			j := sort.Search(len(commits), func(k int) bool { return !commits[k].Before(d.at) })
			if j == len(commits) {
				return out, fmt.Errorf("bench: no workflow task completion after %v in %s", d.at, run.ID)
			}
			out.Durable = append(out.Durable, d.got.Sub(commits[j]))
			out.DurableFromTask = append(out.DurableFromTask, d.got.Sub(d.at))
		}
	}
	return out, nil
}

// taskCompletions returns the times of an execution's completed workflow
// tasks, in order.
func taskCompletions(ctx context.Context, c *client.Client, workflowID, runID string) ([]time.Time, error) {
	it := c.Temporal().GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var out []time.Time
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, err
		}
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			out = append(out, ev.GetEventTime().AsTime())
		}
	}
	return out, nil
}
