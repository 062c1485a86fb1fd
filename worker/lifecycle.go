package worker

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/keelrun/keel/activities"
	"github.com/keelrun/keel/api"
)

// lifecycle finds and signals keel's workflows through visibility.
type lifecycle struct {
	c         client.Client
	namespace string
}

var _ activities.Lifecycle = lifecycle{}

func (l lifecycle) ActiveRuns(ctx context.Context) ([]string, error) {
	return l.list(ctx, fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running'", api.RunWorkflowName))
}

func (l lifecycle) Sessions(ctx context.Context) ([]string, error) {
	return l.list(ctx, fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running'", api.SessionWorkflowName))
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
	v, err := l.c.QueryWorkflow(ctx, api.RuntimeWorkflowID, "", api.QueryState)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var st api.RuntimeStatus
	return st.ShutDown, v.Get(&st)
}
