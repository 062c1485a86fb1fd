package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/schedreg"
)

// A schedule's firing (docs/contract.md §22). A Temporal Schedule can
// only start a workflow; ScheduledSend is that workflow, and all it does
// is hand the prompt to keel's own send path through activities: the
// worker checks the schedule against its rules again (they may have
// changed since the schedule was made), then sends the prompt with the
// session's "send" update, as any client does. With PauseOnFailure it
// waits for the run's outcome, so that a failed run fails the firing and
// Temporal pauses the schedule.

// The search attributes Temporal sets on the workflows a schedule starts:
// TemporalScheduledStartTime, the firing's nominal time, and
// TemporalScheduledById, the schedule that started it.
var (
	scheduledStartTime = temporal.NewSearchAttributeKeyTime("TemporalScheduledStartTime")
	scheduledByID      = temporal.NewSearchAttributeKeyKeyword("TemporalScheduledById")
)

// Timeouts of the firing's activities.
const (
	// scheduledSendTimeout bounds one attempt of the send: a send returns
	// once its run started, which can wait for a busy session.
	scheduledSendTimeout = 5 * time.Minute
	// awaitRunTimeout bounds one attempt of the wait for the run's end,
	// which heartbeats every awaitRunHeartbeat; a run may wait days for
	// host input, so the wait is retried for as long as it lasts.
	awaitRunTimeout   = 24 * time.Hour
	awaitRunHeartbeat = time.Minute
)

// ScheduledSendWorkflow is one firing of a keel schedule, or, with
// in.Check, the check that create and update run on a worker. Its result
// is what the firing did; while it waits for its run, its "state" query
// answers what it sent (nil before that), for describe.
func ScheduledSendWorkflow(ctx workflow.Context, in api.ScheduledSendInput) (*api.ScheduledSendResult, error) {
	permanent := []string{string(keel.CodeInvalidInput), string(keel.CodeTooLarge), string(keel.CodeNotAccepting),
		string(keel.CodeRuntimeShutdown), string(keel.CodeNotFound), string(keel.CodeRunActive)}
	if in.Check {
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: time.Minute,
			// A quota's refusal is final for this create.
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3,
				NonRetryableErrorTypes: append(permanent, string(keel.CodeTooMany))},
			Summary: "check schedule " + in.Schedule.ID,
		})
		if err := workflow.ExecuteActivity(actx, schedreg.CheckScheduleActivity, in.Schedule).Get(ctx, nil); err != nil || !in.Reserve {
			return nil, err
		}
		// The schedule's place in the registry (docs/contract.md §22.11),
		// under the worker's limits; create gives it back if it fails.
		return nil, workflow.ExecuteActivity(actx, schedreg.ReserveScheduleActivity,
			schedreg.ScheduleReservation{ID: in.Schedule.ID, Owner: in.Owner}).Get(ctx, nil)
	}
	info := workflow.GetInfo(ctx)
	at, ok := workflow.GetTypedSearchAttributes(ctx).GetTime(scheduledStartTime)
	if !ok {
		// Started by hand rather than by the schedule: now is its time.
		at = info.WorkflowStartTime
	}
	sctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: scheduledSendTimeout,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 5, NonRetryableErrorTypes: permanent},
		Summary:             "send the prompt of schedule " + in.Schedule.ID,
	})
	var res api.ScheduledSendResult
	sent := false
	// describe reads what a firing that waits for its run did so far.
	if err := workflow.SetQueryHandler(ctx, api.QueryState, func() (*api.ScheduledSendResult, error) {
		if !sent {
			return nil, nil
		}
		return &res, nil
	}); err != nil {
		return nil, err
	}
	req := schedreg.ScheduledSendRequest{Schedule: in.Schedule, At: at,
		UpdateID: info.WorkflowExecution.ID + "/" + info.WorkflowExecution.RunID}
	if err := workflow.ExecuteActivity(sctx, schedreg.SendScheduledActivity, req).Get(ctx, &res); err != nil {
		return nil, pauseOnFailure(ctx, in.Schedule, sendFailed(err))
	}
	sent = true
	if !in.Schedule.PauseOnFailure || res.Skipped || res.Number == 0 {
		return &res, nil
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: awaitRunTimeout,
		HeartbeatTimeout:    awaitRunHeartbeat,
		// Only the worker's loss ends an attempt early; the run's own
		// failure is the activity's result.
		RetryPolicy: &temporal.RetryPolicy{MaximumInterval: time.Minute},
		Summary:     "wait for " + res.RunID,
	})
	var out keel.Outcome
	err := workflow.ExecuteActivity(actx, schedreg.AwaitScheduledRunActivity,
		schedreg.ScheduledRunRef{Session: res.Session, Number: res.Number}).Get(ctx, &out)
	if err != nil {
		return nil, err
	}
	res.Outcome = &out
	if out.Status == keel.StatusFailed {
		return nil, pauseOnFailure(ctx, in.Schedule, runFailed(res))
	}
	return &res, nil
}

// pauseOnFailure pauses the schedule that started this firing, when it
// asks for that, before the firing fails with failure. keel pauses it
// itself: Temporal's own PauseOnFailure watches only the firings it
// tracks, and it tracks none of a schedule whose firings may overlap
// (docs/contract.md §22.5). The schedule is the one Temporal names as
// the firing's (not the input's word); a firing started by hand pauses
// nothing. A pause that fails is left: the firing's failure stands.
func pauseOnFailure(ctx workflow.Context, s api.Schedule, failure error) error {
	id, ok := workflow.GetTypedSearchAttributes(ctx).GetKeyword(scheduledByID)
	if !s.PauseOnFailure || !ok || id == "" {
		return failure
	}
	why := failure.Error()
	var appErr *temporal.ApplicationError
	if errors.As(failure, &appErr) {
		why = appErr.Message()
	}
	note := clip(api.PausedByFailureNote+workflow.GetInfo(ctx).WorkflowExecution.ID+": "+why, api.MaxScheduleNoteBytes/4)
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 5},
		Summary:             "pause schedule " + id,
	})
	if err := workflow.ExecuteActivity(actx, schedreg.PauseScheduleActivity, schedreg.SchedulePause{ID: id, Note: note}).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("could not pause the schedule after a failed firing", "schedule", id, "error", err)
	}
	return failure
}

// sendFailed is the failure of a firing whose send failed: the worker's
// keel error itself rather than Temporal's wrapping of the activity's, so
// that its message is what the schedule's note says when it pauses.
func sendFailed(err error) error {
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) {
		return err
	}
	var ke keel.Error
	if !appErr.HasDetails() || appErr.Details(&ke) != nil || ke.Code == "" {
		ke = keel.Error{Code: keel.Code(appErr.Type()), Message: appErr.Message()}
	}
	return temporal.NewNonRetryableApplicationError("send refused: "+ke.Message, string(ke.Code), nil,
		api.FiringFailure{Error: ke})
}

// runFailed is the failure of a firing whose run failed: its message names
// the run and says why (Temporal puts it in the note of the schedule it
// pauses), its details hold the firing's result, and its type is the
// run's error code.
func runFailed(res api.ScheduledSendResult) error {
	ke := keel.Error{Code: keel.CodeInternal, Message: "the run failed"}
	if e := res.Outcome.Error; e != nil {
		ke = *e
	}
	msg := fmt.Sprintf("run %s failed: %s: %s", res.RunID, ke.Code, ke.Message)
	return temporal.NewNonRetryableApplicationError(msg, string(ke.Code), nil, api.FiringFailure{Error: ke, Result: &res})
}
