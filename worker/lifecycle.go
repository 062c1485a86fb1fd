package worker

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/keelrun/keel/activities"
	"github.com/keelrun/keel/workflows"
)

// lifecycle finds and signals keel's workflows through visibility.
type lifecycle struct {
	c         client.Client
	namespace string
}

var _ activities.Lifecycle = lifecycle{}

func (l lifecycle) ActiveRuns(ctx context.Context) ([]string, error) {
	return l.list(ctx, fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running'", workflows.RunWorkflowName))
}

func (l lifecycle) Sessions(ctx context.Context) ([]string, error) {
	return l.list(ctx, fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running'", workflows.SessionWorkflowName))
}

func (l lifecycle) list(ctx context.Context, query string) ([]string, error) {
	var ids []string
	var token []byte
	for {
		resp, err := l.c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: l.namespace, Query: query, NextPageToken: token,
		})
		if err != nil {
			return nil, err
		}
		for _, e := range resp.GetExecutions() {
			ids = append(ids, e.GetExecution().GetWorkflowId())
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return ids, nil
		}
	}
}

func (l lifecycle) Signal(ctx context.Context, workflowID, name string) error {
	err := l.c.SignalWorkflow(ctx, workflowID, "", name, nil)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return nil // it closed in the meantime: nothing to stop
	}
	return err
}

func (l lifecycle) ShutDown(ctx context.Context) (bool, error) {
	v, err := l.c.QueryWorkflow(ctx, workflows.RuntimeWorkflowID, "", workflows.QueryState)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var st workflows.RuntimeStatus
	return st.ShutDown, v.Get(&st)
}
