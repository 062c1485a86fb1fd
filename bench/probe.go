package devserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// The probes below measure bare Temporal round trips on a server, so keel's
// own overheads can be compared with them on the same server in the same
// run. Each starts whatever worker and workflow it needs on its own task
// queue and cleans up after itself.

// Latencies are measured durations in the order they were measured.
type Latencies []time.Duration

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100), or 0
// when there are no samples.
func (l Latencies) Percentile(p float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	sorted := slices.Clone(l)
	slices.Sort(sorted)
	rank := int(p/100*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

// P50 is the median.
func (l Latencies) P50() time.Duration { return l.Percentile(50) }

// P99 is the 99th percentile.
func (l Latencies) P99() time.Duration { return l.Percentile(99) }

// Mean is the average, or 0 when there are no samples.
func (l Latencies) Mean() time.Duration {
	if len(l) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range l {
		sum += d
	}
	return sum / time.Duration(len(l))
}

// String summarizes the samples: count, p50, p99 and mean.
func (l Latencies) String() string {
	return fmt.Sprintf("n=%d p50=%v p99=%v mean=%v", len(l), l.P50(), l.P99(), l.Mean())
}

// Names of the probe workflows, activities and handlers, prefixed so they
// never collide with keel's.
const (
	probeActivityLoop = "keel.devserver.ActivityLoop"
	probeNoop         = "keel.devserver.Noop"
	probeWorkflow     = "keel.devserver.Probe"
	probeQuery        = "probe_state"
	probeUpdate       = "probe_ping"
	probeStop         = "probe_stop"
)

// MeasureActivityRoundTrip runs a workflow that executes n+1 no-op
// activities in sequence and returns the n intervals between consecutive
// activity starts: one bare activity round trip each (completion, workflow
// task, scheduling and dispatch of the next activity). taskQueue must not be
// polled by any other worker; "" picks a fresh one.
func MeasureActivityRoundTrip(ctx context.Context, c client.Client, taskQueue string, n int) (Latencies, error) {
	if n < 1 {
		return nil, errors.New("devserver: n must be positive")
	}
	if taskQueue == "" {
		taskQueue = uniqueName("probe-activity")
	}
	var (
		mu     sync.Mutex
		starts []time.Time
	)
	w := worker.New(c, taskQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(activityLoopWorkflow, workflow.RegisterOptions{Name: probeActivityLoop})
	w.RegisterActivityWithOptions(func(context.Context) error {
		// Wall-clock time in the worker: workflow time only moves in
		// whole workflow tasks.
		mu.Lock()
		starts = append(starts, time.Now())
		mu.Unlock()
		return nil
	}, activity.RegisterOptions{Name: probeNoop})
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("devserver: probe worker: %w", err)
	}
	defer w.Stop()

	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:        uniqueName("probe-activity"),
		TaskQueue: taskQueue,
	}, probeActivityLoop, n+1)
	if err != nil {
		return nil, fmt.Errorf("devserver: start probe workflow: %w", err)
	}
	if err := run.Get(ctx, nil); err != nil {
		return nil, fmt.Errorf("devserver: probe workflow: %w", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(starts) != n+1 {
		// A retried activity would count twice and skew the intervals.
		return nil, fmt.Errorf("devserver: %d activity starts for %d activities", len(starts), n+1)
	}
	lat := make(Latencies, n)
	for i := range lat {
		lat[i] = starts[i+1].Sub(starts[i])
	}
	return lat, nil
}

func activityLoopWorkflow(ctx workflow.Context, n int) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	for range n {
		if err := workflow.ExecuteActivity(ctx, probeNoop).Get(ctx, nil); err != nil {
			return err
		}
	}
	return nil
}

// MeasureQueryRoundTrip measures n queries to a running workflow whose
// worker has it cached, as keel's state and events queries do. taskQueue
// must not be polled by any other worker; "" picks a fresh one.
func MeasureQueryRoundTrip(ctx context.Context, c client.Client, taskQueue string, n int) (Latencies, error) {
	return measureProbe(ctx, c, taskQueue, n, func(id string) error {
		v, err := c.QueryWorkflow(ctx, id, "", probeQuery)
		if err != nil {
			return err
		}
		var state int
		return v.Get(&state)
	})
}

// MeasureUpdateRoundTrip measures n workflow updates, each waited on until
// the workflow's handler completed it, as keel's send and steer do.
// taskQueue must not be polled by any other worker; "" picks a fresh one.
func MeasureUpdateRoundTrip(ctx context.Context, c client.Client, taskQueue string, n int) (Latencies, error) {
	i := 0
	return measureProbe(ctx, c, taskQueue, n, func(id string) error {
		i++
		h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
			WorkflowID:   id,
			UpdateName:   probeUpdate,
			Args:         []any{i},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		})
		if err != nil {
			return err
		}
		var got int
		if err := h.Get(ctx, &got); err != nil {
			return err
		}
		if got != i {
			return fmt.Errorf("update returned %d, want %d", got, i)
		}
		return nil
	})
}

// measureProbe runs a probe workflow, makes one unmeasured call so the
// workflow is running and cached on the worker, then times n calls.
func measureProbe(ctx context.Context, c client.Client, taskQueue string, n int, call func(workflowID string) error) (Latencies, error) {
	if n < 1 {
		return nil, errors.New("devserver: n must be positive")
	}
	if taskQueue == "" {
		taskQueue = uniqueName("probe")
	}
	w := worker.New(c, taskQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(probeWorkflowFunc, workflow.RegisterOptions{Name: probeWorkflow})
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("devserver: probe worker: %w", err)
	}
	defer w.Stop()

	id := uniqueName("probe")
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: taskQueue}, probeWorkflow)
	if err != nil {
		return nil, fmt.Errorf("devserver: start probe workflow: %w", err)
	}
	defer func() {
		// Ends the workflow whether or not the probe succeeded.
		_ = c.SignalWorkflow(context.WithoutCancel(ctx), id, run.GetRunID(), probeStop, nil)
		_ = run.Get(ctx, nil)
	}()
	if err := call(id); err != nil {
		return nil, fmt.Errorf("devserver: warm-up call: %w", err)
	}
	lat := make(Latencies, 0, n)
	for range n {
		t0 := time.Now()
		if err := call(id); err != nil {
			return nil, fmt.Errorf("devserver: probe call: %w", err)
		}
		lat = append(lat, time.Since(t0))
	}
	return lat, nil
}

// probeWorkflowFunc answers queries and updates until signalled to stop.
func probeWorkflowFunc(ctx workflow.Context) error {
	state := 0
	if err := workflow.SetQueryHandler(ctx, probeQuery, func() (int, error) { return state, nil }); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandler(ctx, probeUpdate, func(_ workflow.Context, v int) (int, error) {
		state = v
		return v, nil
	}); err != nil {
		return err
	}
	workflow.GetSignalChannel(ctx, probeStop).Receive(ctx, nil)
	// Let updates accepted in the same workflow task finish first.
	return workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
}

func uniqueName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}
