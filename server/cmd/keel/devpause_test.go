//go:build !nodev

package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"

	updatepb "go.temporal.io/api/update/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
)

// When this test binary runs as `keel dev` for a kill -9 test
// (startDevProcess) with envDevPause set, its Temporal frontend holds
// calls at the points the variable names, so that the test can kill the
// whole process exactly there: the server has done what the point says,
// and nothing after it. Each point holds the first call that reaches it,
// prints "keel-test-paused POINT" on stdout (devPausedLine), and waits
// until the process is killed (or the caller gives up). Points:
//
//	query:NAME        a query of type NAME was answered; the answer is held
//	start:ID          workflow ID was started; the starter is not told
//	first-task:ID     ID's first workflow task was handed to a worker,
//	                  which does not get it: the task is started, never
//	                  completed
//	update-task:NAME  a workflow task carrying an update named NAME was
//	                  handed to a worker, which does not get it
//	update-done:NAME  an update named NAME completed; its caller is not told
func init() {
	spec := os.Getenv(envDevPause)
	if spec == "" || os.Getenv(envRunAsKeel) != "1" {
		return
	}
	p := &devPauses{armed: map[string]bool{}}
	for _, point := range strings.Split(spec, ",") {
		kind, _, ok := strings.Cut(point, ":")
		switch {
		case !ok:
			panic(fmt.Sprintf("%s: %q is not KIND:ARG", envDevPause, point))
		case kind != "query" && kind != "start" && kind != "first-task" && kind != "update-task" && kind != "update-done":
			panic(fmt.Sprintf("%s: no pause point of kind %q", envDevPause, kind))
		}
		p.armed[point] = true
	}
	devFrontendInterceptors = append(devFrontendInterceptors, p.intercept)
}

// devPauses holds the armed points; each fires once.
type devPauses struct {
	mu    sync.Mutex
	armed map[string]bool
}

// intercept lets the call through, then holds it if it reached an armed
// point.
func (p *devPauses) intercept(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	if err != nil {
		return resp, err
	}
	for _, point := range reached(req, resp) {
		if p.fire(point) {
			fmt.Fprintf(os.Stdout, "%s %s\n", devPausedLine, point)
			<-ctx.Done()
			return nil, ctx.Err()
		}
	}
	return resp, nil
}

func (p *devPauses) fire(point string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.armed[point] {
		return false
	}
	delete(p.armed, point)
	return true
}

// reached lists the points a call that succeeded has reached.
func reached(req, resp any) []string {
	switch r := req.(type) {
	case *workflowservice.QueryWorkflowRequest:
		return []string{"query:" + r.GetQuery().GetQueryType()}
	case *workflowservice.StartWorkflowExecutionRequest:
		return []string{"start:" + r.GetWorkflowId()}
	case *workflowservice.UpdateWorkflowExecutionRequest:
		if out, ok := resp.(*workflowservice.UpdateWorkflowExecutionResponse); ok && out.GetOutcome() != nil {
			return []string{"update-done:" + r.GetRequest().GetInput().GetName()}
		}
	case *workflowservice.PollWorkflowTaskQueueRequest:
		task, ok := resp.(*workflowservice.PollWorkflowTaskQueueResponse)
		if !ok || len(task.GetTaskToken()) == 0 {
			return nil // an empty poll
		}
		var points []string
		// No workflow task of the execution was processed before this
		// one: its first (a sticky task's partial history has a
		// previous one).
		if task.GetPreviousStartedEventId() == 0 {
			points = append(points, "first-task:"+task.GetWorkflowExecution().GetWorkflowId())
		}
		for _, m := range task.GetMessages() {
			var u updatepb.Request
			if m.GetBody().UnmarshalTo(&u) == nil {
				points = append(points, "update-task:"+u.GetInput().GetName())
			}
		}
		return points
	}
	return nil
}
