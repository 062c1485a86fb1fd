package client

import (
	"context"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
)

// Eval is a handle on an eval (docs/evals.md): the Eval workflow whose
// ID is api.EvalIDPrefix + its ID. It runs on the workers, durably: a
// caller that leaves does not stop it, and a worker killed mid-eval is
// followed by another that runs only the cases not yet finished.
type Eval struct {
	c  *Client
	id string
}

// Eval returns a handle on the eval with this ID; nothing is checked
// until it is used.
func (c *Client) Eval(id string) *Eval { return &Eval{c: c, id: id} }

// ID returns the eval's ID.
func (e *Eval) ID() string { return e.id }

// StartEval checks in (api.EvalInput.Validate: its limits, its cases'
// attachments and expectations) and starts the eval. Starting an ID
// that is running answers that eval, so a caller that lost its first
// answer may start again; an ID of a closed eval is refused with
// keel.ErrInvalidInput.
func (c *Client) StartEval(ctx context.Context, in api.EvalInput) (*Eval, error) {
	if err := in.Validate(); err != nil {
		return nil, err
	}
	_, err := c.tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       api.EvalIDPrefix + in.ID,
		TaskQueue:                api.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		// Else the SDK answers a closed eval as if it had started it.
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		StaticSummary:                            fmt.Sprintf("keel eval %s: %d cases, %d recorded sessions", in.ID, len(in.Cases), len(in.Sessions)),
	}, api.EvalWorkflowName, in)
	if err != nil {
		if isClosedErr(err) || errors.As(err, new(*serviceerror.WorkflowExecutionAlreadyStarted)) {
			return nil, keel.Errorf(keel.CodeInvalidInput, "eval %s already ran; give a new ID", in.ID)
		}
		return nil, fromTemporal(err, "eval "+in.ID)
	}
	return c.Eval(in.ID), nil
}

// Status returns the eval's progress. Once it ended, its State says how,
// and its counts are the report's.
func (e *Eval) Status(ctx context.Context) (api.EvalStatus, error) {
	wid := api.EvalIDPrefix + e.id
	desc, err := e.c.tc.DescribeWorkflowExecution(ctx, wid, "")
	if err != nil {
		return api.EvalStatus{}, fromTemporal(err, "eval "+e.id)
	}
	switch desc.GetWorkflowExecutionInfo().GetStatus() {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		var st api.EvalStatus
		v, err := e.c.queryWorkflow(ctx, wid, api.QueryState)
		if err == nil {
			err = v.Get(&st)
		}
		return st, fromTemporal(err, "eval "+e.id)
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		rep, err := e.Report(ctx)
		if err != nil {
			return api.EvalStatus{}, err
		}
		return statusOf(rep), nil
	case enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED, enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED:
		return api.EvalStatus{ID: e.id, State: api.EvalCancelled}, nil
	}
	st := api.EvalStatus{ID: e.id, State: api.EvalFailed}
	if _, err := e.Report(ctx); err != nil {
		var ke *keel.Error
		if errors.As(err, &ke) {
			st.Error = ke
		} else {
			st.Error = &keel.Error{Code: keel.CodeInternal, Message: err.Error()}
		}
	}
	return st, nil
}

// statusOf is the status of an eval that ended with rep.
func statusOf(rep api.EvalReport) api.EvalStatus {
	st := api.EvalStatus{ID: rep.ID, State: api.EvalCompleted, Total: len(rep.Cases)}
	if rep.Cancelled {
		st.State = api.EvalCancelled
	}
	t := rep.Candidate
	st.Done, st.Passed, st.Failed = t.Cases-t.Skipped, t.Passed, t.Failed+t.Errors
	st.Usage = t.Usage.Add(t.JudgeUsage)
	if rep.Baseline != nil {
		st.Usage = st.Usage.Add(rep.Baseline.JudgeUsage)
	}
	for _, c := range rep.Cases {
		// A recorded run was paid for when it ran.
		if b := c.Baseline; b != nil && b.Run != nil && c.From == nil {
			st.Usage = st.Usage.Add(b.Run.Usage)
		}
	}
	return st
}

// Report waits for the eval to end and returns its report. A cancelled
// eval's report holds what finished (EvalReport.Cancelled); an eval
// that failed (its input refused, its recorded sessions not found)
// returns its typed error.
func (e *Eval) Report(ctx context.Context) (api.EvalReport, error) {
	var rep api.EvalReport
	err := e.c.tc.GetWorkflow(ctx, api.EvalIDPrefix+e.id, "").Get(ctx, &rep)
	var canceled *temporal.CanceledError
	if errors.As(err, &canceled) {
		return api.EvalReport{ID: e.id, Cancelled: true}, nil
	}
	return rep, fromTemporal(err, "eval "+e.id)
}

// Cancel cancels the eval: no case starts, the running cases' runs are
// cancelled, and its report holds what finished. Cancelling an eval that
// ended does nothing.
func (e *Eval) Cancel(ctx context.Context) error {
	err := e.c.tc.CancelWorkflow(ctx, api.EvalIDPrefix+e.id, "")
	if isClosedErr(err) {
		if _, derr := e.c.tc.DescribeWorkflowExecution(ctx, api.EvalIDPrefix+e.id, ""); derr == nil {
			return nil
		}
	}
	return fromTemporal(err, "eval "+e.id)
}
