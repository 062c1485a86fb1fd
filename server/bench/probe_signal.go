package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	sdkclient "go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

const (
	probeSignalSink = "keel.bench.SignalSink"
	probeSignal     = "probe_signal"
)

// MeasureSignalToHistory measures n times how long a signal sent with
// signaler takes to be seen by a history long-poll (GetWorkflowHistory with
// WaitNewEvent) made with observer, another client: the path keel's live
// subscribers use to learn of new durable events. The target workflow has no
// worker, so this is the server's path alone: each signal appends exactly
// one event.
func MeasureSignalToHistory(ctx context.Context, signaler, observer sdkclient.Client, n int) (Latencies, error) {
	if n < 1 {
		return nil, errors.New("bench: n must be positive")
	}
	id := uniqueName("probe-signal")
	run, err := signaler.ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{
		ID:        id,
		TaskQueue: uniqueName("probe-signal"), // nobody polls it
	}, probeSignalSink)
	if err != nil {
		return nil, fmt.Errorf("bench: start probe workflow: %w", err)
	}
	defer terminate(ctx, signaler, run)
	return timeSignals(ctx, signaler, observer, run, n,
		enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED)
}

// MeasureSignalHandled measures n times how long a signal sent with
// signaler takes to be handled by a running workflow, and the workflow task
// that handled it to be seen by a history long-poll made with observer:
// keel's path from a steer or cancel to the event a subscriber sees.
// taskQueue must not be polled by any other worker; "" picks a fresh one.
func MeasureSignalHandled(ctx context.Context, signaler, observer sdkclient.Client, taskQueue string, n int) (Latencies, error) {
	if n < 1 {
		return nil, errors.New("bench: n must be positive")
	}
	if taskQueue == "" {
		taskQueue = uniqueName("probe-signal")
	}
	w := sdkworker.New(signaler, taskQueue, sdkworker.Options{})
	w.RegisterWorkflowWithOptions(signalSinkWorkflow, workflow.RegisterOptions{Name: probeSignalSink})
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("bench: probe worker: %w", err)
	}
	defer w.Stop()
	run, err := signaler.ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{
		ID:        uniqueName("probe-signal"),
		TaskQueue: taskQueue,
	}, probeSignalSink)
	if err != nil {
		return nil, fmt.Errorf("bench: start probe workflow: %w", err)
	}
	defer terminate(ctx, signaler, run)
	// Until the first workflow task completes, the workflow is neither
	// running on the worker nor cached there.
	return timeSignals(ctx, signaler, observer, run, n,
		enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)
}

// signalSinkWorkflow receives signals forever; each one costs a workflow
// task and nothing else.
func signalSinkWorkflow(ctx workflow.Context) error {
	ch := workflow.GetSignalChannel(ctx, probeSignal)
	for {
		ch.Receive(ctx, nil)
	}
}

// timeSignals follows run's history with observer's long-poll iterator, as
// a live subscriber does. Once it has seen ready, it sends n signals one at
// a time and times each from the send until the long poll returns seen.
func timeSignals(ctx context.Context, signaler, observer sdkclient.Client, run sdkclient.WorkflowRun, n int, ready, seen enumspb.EventType) (Latencies, error) {
	events := observer.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), true, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if err := skipUntil(events, ready); err != nil {
		return nil, fmt.Errorf("bench: read probe history: %w", err)
	}
	type result struct {
		at  time.Time
		err error
	}
	lat := make(Latencies, 0, n)
	for i := range n {
		ch := make(chan result, 1)
		go func() {
			err := skipUntil(events, seen)
			ch <- result{time.Now(), err}
		}()
		sent := time.Now()
		if err := signaler.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), probeSignal, i); err != nil {
			return nil, fmt.Errorf("bench: signal probe workflow: %w", err)
		}
		r := <-ch
		if r.err != nil {
			return nil, fmt.Errorf("bench: long-poll probe history: %w", r.err)
		}
		lat = append(lat, r.at.Sub(sent))
	}
	return lat, nil
}

// skipUntil consumes events up to and including the first of type t,
// blocking in the long poll until it is committed.
func skipUntil(events sdkclient.HistoryEventIterator, t enumspb.EventType) error {
	for events.HasNext() {
		e, err := events.Next()
		if err != nil {
			return err
		}
		if e.GetEventType() == t {
			return nil
		}
	}
	return fmt.Errorf("history ended before %v", t)
}

func terminate(ctx context.Context, c sdkclient.Client, run sdkclient.WorkflowRun) {
	_ = c.TerminateWorkflow(context.WithoutCancel(ctx), run.GetID(), run.GetRunID(), "probe done")
}
