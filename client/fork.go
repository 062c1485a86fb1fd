package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
)

// Fork makes a new session whose conversation is this session's committed
// transcript at point p (after run p.Run, or after step p.Step of it),
// whose log begins with keel.SessionForked, and whose next prompt runs on
// top of it (docs/contract.md §19.1). The source is untouched. into names
// the new session; empty, an ID is generated. Nothing is copied: the
// fork's input holds the transcript, which the payload codec stores by
// content, so a fork shares what the source stored.
//
// A point inside the active run is refused with keel.ErrRunActive; a run
// the session does not have, or no longer has in its history, with
// keel.ErrNotFound. Forking again into the same ID at the same point
// answers the fork made before (a crash or a retry never makes two);
// into an ID taken by anything else, or of a child session's form
// (api.IsChildSessionID, docs/contract.md §21.3), fails with
// keel.ErrInvalidInput.
func (s *Session) Fork(ctx context.Context, p api.Point, into string) (*Session, api.ForkOrigin, error) {
	if into == "" {
		into = s.c.NewSession().id
	}
	if err := keel.ValidateSessionID(into); err != nil {
		return nil, api.ForkOrigin{}, err
	}
	if api.IsChildSessionID(into) {
		return nil, api.ForkOrigin{}, keel.Errorf(keel.CodeInvalidInput,
			"%s is a child session's ID: only a parent's delegation starts a session so named", into)
	}
	if into == s.id {
		return nil, api.ForkOrigin{}, keel.Errorf(keel.CodeInvalidInput, "a fork needs an ID of its own, not its source's (%s)", s.id)
	}
	fp, err := s.ForkPoint(ctx, p)
	if err != nil {
		return nil, api.ForkOrigin{}, err
	}
	fork := s.c.Session(into)
	_, err = s.c.tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:        into,
		TaskQueue: api.TaskQueue,
		// The fork exists once or not at all: a second start of the
		// same ID is refused by Temporal, and the fork it found is
		// checked below. A closed session is not replaced either.
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		// Without it the SDK answers the session found as if it had
		// started it.
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		TypedSearchAttributes:                    temporal.NewSearchAttributes(api.AttrSessionID.ValueSet(into), api.AttrParent.ValueSet(s.id)),
		StaticSummary:                            fmt.Sprintf("keel session %s, forked from %s at run %d", into, s.id, p.Run),
		Priority:                                 temporal.Priority{PriorityKey: api.SessionPriority},
	}, api.SessionWorkflowName, api.SessionInput{SessionID: into, Config: fp.Config, HandOver: s.c.handOver, Shape: api.ShapeLean,
		Fork: &api.ForkInput{Origin: fp.Origin, Transcript: fp.Transcript}})
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		st, serr := fork.State(ctx)
		if serr != nil {
			return nil, api.ForkOrigin{}, serr
		}
		if st.Parent == nil || *st.Parent != fp.Origin {
			return nil, api.ForkOrigin{}, keel.Errorf(keel.CodeInvalidInput, "session %s already exists and is not a fork of %s at run %d, step %d",
				into, s.id, p.Run, p.Step)
		}
		return fork, fp.Origin, nil
	}
	if err != nil {
		return nil, api.ForkOrigin{}, fromTemporal(err, "session "+into)
	}
	return fork, fp.Origin, nil
}

// Rewind makes the session go on from point p (docs/contract.md §19.2):
// the history its model sees is cut there, its log keeps every event and
// records keel.SessionRewound, and its next run is numbered after its
// last. It is refused with keel.ErrRunActive while a run is active or
// queued, and with keel.ErrNotFound for a point the session does not
// have. A call that is retried (a timeout, a restart of the server) is
// applied once.
func (s *Session) Rewind(ctx context.Context, p api.Point) (api.RewindResult, error) {
	var res api.RewindResult
	updateID := newID()
	err := s.c.resumeUpdate(ctx, s.id, updateID, &res, func() (client.WorkflowUpdateHandle, error) {
		return s.c.tc.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
			WorkflowID: s.id, UpdateID: updateID, UpdateName: api.UpdateRewind, Args: []any{api.RewindRequest{Point: p}},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		})
	})
	if err != nil {
		if isClosedErr(err) && !errors.Is(fromTemporal(err, ""), keel.ErrNotFound) {
			return res, s.closedError(ctx)
		}
		return res, fromTemporal(err, "session "+s.id)
	}
	// The update completed with the workflow task that recorded the
	// rewind: what the caller reads next (keel history, keel events)
	// includes it.
	return res, nil
}

// queryFailure returns the error a query handler failed with, as the
// workflow returned it (a keel error's ApplicationError with its code),
// when the server passed it on; err otherwise.
func queryFailure(err error) error {
	var failed *serviceerror.QueryFailed
	if errors.As(err, &failed) && failed.Failure != nil {
		return temporal.GetDefaultFailureConverter().FailureToError(failed.Failure)
	}
	return err
}

// ForkPoint is what a fork of the session at p starts from: the
// transcript up to the point, the origin a fork records and the source's
// run defaults, without making a fork. Its errors are Fork's.
func (s *Session) ForkPoint(ctx context.Context, p api.Point) (api.ForkPoint, error) {
	var fp api.ForkPoint
	v, err := s.c.queryWorkflow(ctx, s.id, api.QueryForkPoint, api.ForkPointQuery{Point: p})
	if err == nil {
		err = v.Get(&fp)
	}
	if err != nil {
		return api.ForkPoint{}, fromTemporal(queryFailure(err), "session "+s.id)
	}
	return fp, nil
}

// Forks returns the IDs of the sessions forked from this one, sorted, as
// Temporal's visibility lists them (a fork made a moment ago may be
// missing for as long as visibility lags). Forks made before this
// release, which carry no parent search attribute, are not listed.
func (s *Session) Forks(ctx context.Context) ([]string, error) {
	query := fmt.Sprintf("WorkflowType = '%s' AND %s = '%s'", api.SessionWorkflowName, api.AttrParent.GetName(), s.id)
	seen := map[string]bool{}
	var token []byte
	for {
		resp, err := s.c.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: s.c.namespace, Query: query, NextPageToken: token,
		})
		if err != nil {
			return nil, fmt.Errorf("keel: list the forks of session %s: %w", s.id, err)
		}
		for _, e := range resp.GetExecutions() {
			seen[e.GetExecution().GetWorkflowId()] = true
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return slices.Sorted(maps.Keys(seen)), nil
		}
	}
}
