package worker

import (
	"context"
	"errors"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/logging"
)

// errCancelRequested is the cause of a context cancelled by the watch.
var errCancelRequested = errors.New("the workflow asked to cancel this activity")

// cancelLinger is how long a run's history stays followed after its last
// activity returned, so the next turn of the run finds it followed.
const cancelLinger = 30 * time.Second

// cancelWatch is the fast path of cancellation (docs/contract.md §7.5). A
// workflow cancels an activity by recording ActivityTaskCancelRequested in
// its history; Temporal tells the activity in the response to its next
// heartbeat. The watch follows the history of a workflow with an activity
// running on this worker (one long poll per workflow, shared by its
// activities) and cancels the activity's context as soon as that event is
// recorded, so heartbeats need only be as frequent as liveness needs.
//
// With cancel notices (live.CancelNotices) it follows a workflow's history
// only once a notice says the workflow is cancelling something, so a run
// that is never cancelled costs the server no reads; without them it
// follows every workflow it runs activities for. Either way, everything it
// acts on is recorded in history: if a notice is lost or the watch falls
// behind, the heartbeat still brings the cancellation.
type cancelWatch struct {
	c      client.Client
	log    *zap.Logger
	linger time.Duration
	// noticed: follow a workflow only once a cancel notice names it.
	noticed bool

	mu   sync.Mutex
	runs map[execKey]*runWatch
}

// runWatch follows one workflow execution's history.
type runWatch struct {
	// stop ends the follow; nil until it starts.
	stop context.CancelFunc
	// acts are the running activities by activity ID.
	acts map[string]context.CancelCauseFunc
	// scheduled maps ActivityTaskScheduled event IDs to activity IDs;
	// cancelled holds the activity IDs whose cancellation was recorded.
	scheduled map[int64]string
	cancelled map[string]bool
	idle      *time.Timer
}

type execKey struct{ workflowID, runID string }

func newCancelWatch(c client.Client, log *zap.Logger) *cancelWatch {
	return &cancelWatch{c: c, log: log, linger: cancelLinger, runs: map[execKey]*runWatch{}}
}

// Watch implements activities.CancelWatch.
func (w *cancelWatch) Watch(ctx context.Context) (context.Context, func()) {
	info := activity.GetInfo(ctx)
	if info.IsLocalActivity {
		return ctx, func() {}
	}
	k := execKey{info.WorkflowExecution.ID, info.WorkflowExecution.RunID}
	wctx, cancel := context.WithCancelCause(ctx)
	id := info.ActivityID

	w.mu.Lock()
	rw := w.runs[k]
	if rw == nil {
		rw = &runWatch{acts: map[string]context.CancelCauseFunc{},
			scheduled: map[int64]string{}, cancelled: map[string]bool{}}
		w.runs[k] = rw
		if !w.noticed {
			w.startFollow(k, rw)
		}
	}
	if rw.idle != nil {
		rw.idle.Stop()
		rw.idle = nil
	}
	rw.acts[id] = cancel
	if rw.cancelled[id] {
		cancel(errCancelRequested)
	}
	w.mu.Unlock()

	return wctx, func() {
		cancel(nil)
		w.mu.Lock()
		defer w.mu.Unlock()
		if rw.acts[id] == nil {
			return
		}
		delete(rw.acts, id)
		if len(rw.acts) == 0 && rw.idle == nil {
			rw.idle = time.AfterFunc(w.linger, func() { w.retire(k, rw) })
		}
	}
}

// startFollow starts following k's history unless it is followed already.
// w.mu is held.
func (w *cancelWatch) startFollow(k execKey, rw *runWatch) {
	if rw.stop != nil {
		return
	}
	fctx, stop := context.WithCancel(context.Background())
	rw.stop = stop
	go w.follow(fctx, k, rw)
}

// notice starts following the workflow a cancel notice names, if this
// worker runs one of its activities.
func (w *cancelWatch) notice(n live.CancelNotice) {
	k := execKey{n.WorkflowID, n.RunID}
	w.mu.Lock()
	defer w.mu.Unlock()
	if rw := w.runs[k]; rw != nil && len(rw.acts) > 0 {
		w.startFollow(k, rw)
	}
}

// retire stops following a workflow that has had no running activity for
// the linger time.
func (w *cancelWatch) retire(k execKey, rw *runWatch) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(rw.acts) > 0 {
		return
	}
	if w.runs[k] == rw {
		delete(w.runs, k)
	}
	if rw.stop != nil {
		rw.stop()
	}
}

// follow reads the workflow's history with long polls until it closes or
// the watch retires, cancelling activities as their cancellation is
// recorded. A read that fails starts over after a pause.
func (w *cancelWatch) follow(ctx context.Context, k execKey, rw *runWatch) {
	defer func() {
		w.mu.Lock()
		if w.runs[k] == rw {
			delete(w.runs, k)
		}
		w.mu.Unlock()
	}()
	for ctx.Err() == nil {
		err := w.read(ctx, k, rw)
		if err == nil || ctx.Err() != nil {
			return // the workflow closed, or the watch retired
		}
		logging.ForWorkflow(w.log, k.workflowID).Debug("cancel watch: history read failed; heartbeats still deliver cancellation",
			zap.String("workflow_id", k.workflowID), zap.Error(err))
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// read follows the history from its start to the workflow's close.
func (w *cancelWatch) read(ctx context.Context, k execKey, rw *runWatch) error {
	it := w.c.GetWorkflowHistory(ctx, k.workflowID, k.runID, true, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return err
		}
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			w.mu.Lock()
			rw.scheduled[ev.GetEventId()] = ev.GetActivityTaskScheduledEventAttributes().GetActivityId()
			w.mu.Unlock()
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED:
			w.mu.Lock()
			id := rw.scheduled[ev.GetActivityTaskCancelRequestedEventAttributes().GetScheduledEventId()]
			rw.cancelled[id] = true
			if cancel := rw.acts[id]; cancel != nil {
				cancel(errCancelRequested)
			}
			w.mu.Unlock()
		}
	}
	return nil
}
