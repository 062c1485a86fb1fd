package bench

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
	sdkclient "go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// The probes below measure bare Temporal round trips on a server, so keel's
// own overheads can be compared with them on the same server in the same
// run. Each starts whatever worker and workflow it needs on its own task
// queue and cleans up after itself.

// Names of the probe workflows, activities and handlers, prefixed so they
// never collide with keel's.
const (
	probeActivityLoop = "keel.bench.ActivityLoop"
	probeNoop         = "keel.bench.Noop"
	probeWorkflow     = "keel.bench.Probe"
	probeQuery        = "probe_state"
	probeUpdate       = "probe_ping"
	probeStop         = "probe_stop"
)

// MeasureActivityRoundTrip runs a workflow that executes n+1 no-op
// activities in sequence and returns the n intervals between consecutive
// activity starts: one bare activity round trip each (completion, workflow
// task, scheduling and dispatch of the next activity). taskQueue must not be
// polled by any other worker; "" picks a fresh one.
func MeasureActivityRoundTrip(ctx context.Context, c sdkclient.Client, taskQueue string, n int) (Latencies, error) {
	if n < 1 {
		return nil, errors.New("bench: n must be positive")
	}
	if taskQueue == "" {
		taskQueue = uniqueName("probe-activity")
	}
	var (
		mu     sync.Mutex
		starts []time.Time
	)
	w := sdkworker.New(c, taskQueue, sdkworker.Options{})
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
		return nil, fmt.Errorf("bench: probe worker: %w", err)
	}
	defer w.Stop()

	run, err := c.ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{
		ID:        uniqueName("probe-activity"),
		TaskQueue: taskQueue,
	}, probeActivityLoop, n+1)
	if err != nil {
		return nil, fmt.Errorf("bench: start probe workflow: %w", err)
	}
	if err := run.Get(ctx, nil); err != nil {
		return nil, fmt.Errorf("bench: probe workflow: %w", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(starts) != n+1 {
		// A retried activity would count twice and skew the intervals.
		return nil, fmt.Errorf("bench: %d activity starts for %d activities", len(starts), n+1)
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

// MeasureConcurrentActivities runs k workflows at once on one worker, as
// many concurrent agent sessions would, each executing no-op activities in
// sequence, and returns about n intervals between consecutive activity
// starts within a workflow, in the order the intervals ended.
func MeasureConcurrentActivities(ctx context.Context, c sdkclient.Client, k, n int) (Latencies, error) {
	if k < 1 || n < 1 {
		return nil, errors.New("bench: k and n must be positive")
	}
	perWorkflow := (n+k-1)/k + 1
	var (
		mu     sync.Mutex
		starts = map[string][]time.Time{}
	)
	tq := uniqueName("probe-concurrent")
	w := sdkworker.New(c, tq, sdkworker.Options{})
	w.RegisterWorkflowWithOptions(activityLoopWorkflow, workflow.RegisterOptions{Name: probeActivityLoop})
	w.RegisterActivityWithOptions(func(ctx context.Context) error {
		id := activity.GetInfo(ctx).WorkflowExecution.ID
		mu.Lock()
		starts[id] = append(starts[id], time.Now())
		mu.Unlock()
		return nil
	}, activity.RegisterOptions{Name: probeNoop})
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("bench: probe worker: %w", err)
	}
	defer w.Stop()
	runs := make([]sdkclient.WorkflowRun, k)
	for i := range runs {
		run, err := c.ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{ID: uniqueName("probe-concurrent"), TaskQueue: tq},
			probeActivityLoop, perWorkflow)
		if err != nil {
			return nil, fmt.Errorf("bench: start probe workflow: %w", err)
		}
		runs[i] = run
	}
	for _, run := range runs {
		if err := run.Get(ctx, nil); err != nil {
			return nil, fmt.Errorf("bench: probe workflow: %w", err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	// In the order the intervals ended, so that dropping the first ones
	// drops the earliest.
	type interval struct {
		end time.Time
		d   time.Duration
	}
	var all []interval
	for _, ts := range starts {
		for i := 1; i < len(ts); i++ {
			all = append(all, interval{ts[i], ts[i].Sub(ts[i-1])})
		}
	}
	slices.SortFunc(all, func(a, b interval) int { return a.end.Compare(b.end) })
	lat := make(Latencies, len(all))
	for i, iv := range all {
		lat[i] = iv.d
	}
	return lat, nil
}

// MeasureQueryRoundTrip measures n queries to a running workflow whose
// worker has it cached, as keel's state and events queries do. taskQueue
// must not be polled by any other worker; "" picks a fresh one.
func MeasureQueryRoundTrip(ctx context.Context, c sdkclient.Client, taskQueue string, n int) (Latencies, error) {
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
func MeasureUpdateRoundTrip(ctx context.Context, c sdkclient.Client, taskQueue string, n int) (Latencies, error) {
	i := 0
	return measureProbe(ctx, c, taskQueue, n, func(id string) error {
		i++
		h, err := c.UpdateWorkflow(ctx, sdkclient.UpdateWorkflowOptions{
			WorkflowID:   id,
			UpdateName:   probeUpdate,
			Args:         []any{i},
			WaitForStage: sdkclient.WorkflowUpdateStageCompleted,
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
func measureProbe(ctx context.Context, c sdkclient.Client, taskQueue string, n int, call func(workflowID string) error) (Latencies, error) {
	if n < 1 {
		return nil, errors.New("bench: n must be positive")
	}
	if taskQueue == "" {
		taskQueue = uniqueName("probe")
	}
	w := sdkworker.New(c, taskQueue, sdkworker.Options{})
	w.RegisterWorkflowWithOptions(probeWorkflowFunc, workflow.RegisterOptions{Name: probeWorkflow})
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("bench: probe worker: %w", err)
	}
	defer w.Stop()

	id := uniqueName("probe")
	run, err := c.ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{ID: id, TaskQueue: taskQueue}, probeWorkflow)
	if err != nil {
		return nil, fmt.Errorf("bench: start probe workflow: %w", err)
	}
	defer func() {
		// Ends the workflow whether or not the probe succeeded.
		_ = c.SignalWorkflow(context.WithoutCancel(ctx), id, run.GetRunID(), probeStop, nil)
		_ = run.Get(ctx, nil)
	}()
	if err := call(id); err != nil {
		return nil, fmt.Errorf("bench: warm-up call: %w", err)
	}
	lat := make(Latencies, 0, n)
	for range n {
		t0 := time.Now()
		if err := call(id); err != nil {
			return nil, fmt.Errorf("bench: probe call: %w", err)
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
