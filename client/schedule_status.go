package client

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/schedreg"
)

// firingLookup bounds what Describe spends on one firing's result and its
// run's state, so that a firing it cannot read is shown without them.
const firingLookup = 5 * time.Second

// temporalPausedByFailure starts the note Temporal writes when it pauses
// a schedule whose firing failed (its own PauseOnFailure, for a schedule
// made outside keel); keel's firings write api.PausedByFailureNote.
const temporalPausedByFailure = "paused due to workflow "

// Describe returns the schedule: its definition, whether it is paused and
// why, its next firing times, and its latest firings with the sessions
// and runs they made and how those runs went.
func (h *Schedule) Describe(ctx context.Context) (api.ScheduleStatus, error) {
	d, s, err := h.definition(ctx)
	if err != nil {
		return api.ScheduleStatus{}, err
	}
	st := api.ScheduleStatus{Schedule: s, Next: d.Info.NextActionTimes, Fired: d.Info.NumActions,
		Missed: d.Info.NumActionsMissedCatchupWindow, Created: d.Info.CreatedAt, Updated: d.Info.LastUpdateAt,
		Recent: []api.ScheduleFiring{}}
	if d.Schedule.State != nil {
		st.Paused, st.Note = d.Schedule.State.Paused, d.Schedule.State.Note
	}
	if st.Next == nil || st.Paused {
		st.Next = []time.Time{}
	}
	for _, a := range d.Info.RecentActions {
		if a.StartWorkflowResult == nil {
			continue
		}
		st.Recent = append(st.Recent, h.c.firing(ctx, a))
	}
	if st.Paused && (strings.HasPrefix(st.Note, api.PausedByFailureNote) || strings.HasPrefix(st.Note, temporalPausedByFailure)) {
		st.PausedByFailure = true
		for _, f := range slices.Backward(st.Recent) {
			if f.Status == api.FiringFailed {
				st.Failure = f.Error
				break
			}
		}
	}
	return st, nil
}

// firing reads what one firing did: its workflow's result (or failure),
// and the state of the run it started.
func (c *Client) firing(ctx context.Context, a client.ScheduleActionResult) api.ScheduleFiring {
	ctx, cancel := context.WithTimeout(ctx, firingLookup)
	defer cancel()
	wf := a.StartWorkflowResult
	f := api.ScheduleFiring{ScheduledAt: a.ScheduleTime, StartedAt: a.ActualTime, WorkflowID: wf.WorkflowID,
		Status: api.FiringSending}
	desc, err := c.tc.DescribeWorkflowExecution(ctx, wf.WorkflowID, wf.FirstExecutionRunID)
	if err != nil {
		return f
	}
	switch desc.GetWorkflowExecutionInfo().GetStatus() {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		// It sends, or it sent and waits for the run's outcome.
		var res *api.ScheduledSendResult
		if v, err := c.tc.QueryWorkflow(ctx, wf.WorkflowID, wf.FirstExecutionRunID, api.QueryState); err == nil &&
			v.Get(&res) == nil && res != nil {
			// A firing that skipped or was refused returns in the task
			// that did so; the describe above saw it before that task
			// completed.
			f.Result = res
			f.Status, f.Error = sentStatus(res)
			if o := res.Outcome; o != nil && o.Status == keel.StatusFailed {
				// Its run failed: it pauses its schedule, then fails.
				f.Status, f.Error = api.FiringFailed, o.Error
			}
		}
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		var res api.ScheduledSendResult
		if err := c.tc.GetWorkflow(ctx, wf.WorkflowID, wf.FirstExecutionRunID).Get(ctx, &res); err == nil {
			f.Result = &res
			f.Status, f.Error = sentStatus(&res)
		}
	default:
		f.Status = api.FiringFailed
		f.Error = c.firingFailure(ctx, wf)
		if f.Error != nil && f.Result == nil {
			f.Result = c.failedResult(ctx, wf)
		}
	}
	if r := f.Result; r != nil && !r.Skipped && r.Number > 0 {
		f.Run = c.runStatus(ctx, r)
	}
	return f
}

// sentStatus is the status of a firing whose send returned res: sent,
// skipped, or refused by a limit (with why).
func sentStatus(res *api.ScheduledSendResult) (string, *keel.Error) {
	switch {
	case res.Skipped:
		return api.FiringSkipped, nil
	case res.Refused != nil:
		return api.FiringRefused, res.Refused
	}
	return api.FiringSent, nil
}

// firingFailure is why a firing's workflow failed: the keel error it
// failed with, or what Temporal says (a timeout, a termination).
func (c *Client) firingFailure(ctx context.Context, wf *client.ScheduleWorkflowExecution) *keel.Error {
	err := c.tc.GetWorkflow(ctx, wf.WorkflowID, wf.FirstExecutionRunID).Get(ctx, nil)
	if err == nil {
		return nil
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		var ff api.FiringFailure
		if appErr.HasDetails() && appErr.Details(&ff) == nil && ff.Error.Code != "" {
			return &ff.Error
		}
		return &keel.Error{Code: keel.Code(appErr.Type()), Message: appErr.Message()}
	}
	var terminated *temporal.TerminatedError
	var timeout *temporal.TimeoutError
	switch {
	case errors.As(err, &terminated):
		return &keel.Error{Code: keel.CodeTerminated, Message: "the firing's workflow was terminated"}
	case errors.As(err, &timeout):
		return &keel.Error{Code: keel.CodeInternal, Message: "the firing's workflow timed out"}
	}
	return &keel.Error{Code: keel.CodeInternal, Message: "the firing's workflow did not complete"}
}

// failedResult is what a failed firing had done: the run it started,
// when that run's failure failed it.
func (c *Client) failedResult(ctx context.Context, wf *client.ScheduleWorkflowExecution) *api.ScheduledSendResult {
	var appErr *temporal.ApplicationError
	if err := c.tc.GetWorkflow(ctx, wf.WorkflowID, wf.FirstExecutionRunID).Get(ctx, nil); !errors.As(err, &appErr) {
		return nil
	}
	var ff api.FiringFailure
	if !appErr.HasDetails() || appErr.Details(&ff) != nil {
		return nil
	}
	return ff.Result
}

// runStatus says how the run a firing started is doing: its recorded
// outcome when the firing waited for it, else the session's word.
func (c *Client) runStatus(ctx context.Context, r *api.ScheduledSendResult) keel.RunStatus {
	if r.Outcome != nil {
		return r.Outcome.Status
	}
	sess := c.Session(r.Session)
	st, err := sess.State(ctx)
	switch {
	case err != nil:
		return ""
	case st.ActiveRun != nil && st.ActiveRun.Number == r.Number, r.Number > st.Runs:
		return keel.StatusActive
	case st.Last != nil && st.Last.Number == r.Number:
		return st.Last.Status
	}
	o, _ := sess.Run(r.Number).Outcome(ctx)
	return o.Status
}

// ScheduleListOptions filter Schedules.
type ScheduleListOptions struct {
	// Prefix, when set, lists only the schedules whose IDs start with it.
	Prefix string
	// Under, when set, lists only the schedules whose IDs and whose
	// firings' sessions are under it: what a gateway key limited to
	// this prefix reaches. It reads where each sends from the list
	// itself (the schedule's api.AttrSessionID), not schedule by
	// schedule; one without it is left out.
	Under string
	// Limit is the most schedules listed. Default and cap
	// schedreg.MaxSchedulesCeiling.
	Limit int
}

// Schedules lists the namespace's keel schedules, sorted by ID, as
// Temporal's visibility has them (a schedule made a moment ago may be
// missing while it lags), and whether more than the limit matched.
func (c *Client) Schedules(ctx context.Context, opts ScheduleListOptions) ([]api.ScheduleSummary, bool, error) {
	limit := opts.Limit
	if limit <= 0 || limit > schedreg.MaxSchedulesCeiling {
		limit = schedreg.MaxSchedulesCeiling
	}
	out := []api.ScheduleSummary{}
	truncated := false
	err := c.eachSchedule(ctx, func(e *client.ScheduleListEntry) bool {
		if !strings.HasPrefix(e.ID, opts.Prefix) || api.ValidateScheduleID(e.ID) != nil {
			return true
		}
		if opts.Under != "" && !(strings.HasPrefix(e.ID, opts.Under) && strings.HasPrefix(listedTarget(e), opts.Under)) {
			return true
		}
		if len(out) == limit {
			truncated = true
			return false
		}
		sum := api.ScheduleSummary{ID: e.ID, ScheduleState: api.ScheduleState{Paused: e.Paused, Note: e.Note}}
		if len(e.NextActionTimes) > 0 && !e.Paused {
			sum.Next = &e.NextActionTimes[0]
		}
		if n := len(e.RecentActions); n > 0 {
			sum.Last = &e.RecentActions[n-1].ScheduleTime
		}
		out = append(out, sum)
		return true
	})
	slices.SortFunc(out, func(a, b api.ScheduleSummary) int { return cmp.Compare(a.ID, b.ID) })
	return out, truncated, err
}

// listedTarget is where a listed schedule's firings send, as its
// api.AttrSessionID says (scheduleAttributes); "" when it says nothing.
func listedTarget(e *client.ScheduleListEntry) string {
	p := e.SearchAttributes.GetIndexedFields()[api.AttrSessionID.GetName()]
	var target string
	if p == nil || converter.GetDefaultDataConverter().FromPayload(p, &target) != nil {
		return ""
	}
	return target
}
