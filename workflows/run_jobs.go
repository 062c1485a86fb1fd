package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel"
)

// jobs are the detached calls of a run: they run while the loop goes on.
// Their results enter history at the next model-step boundary in the order
// they finished, as user messages (a tool result must follow its call,
// which is long past).
type jobQueue struct {
	running      []*slot
	finishedJobs []*slot
}

// jobDone moves a finished job to the boundary queue.
func (r *run) jobDone(s *slot) {
	for i, j := range r.running {
		if j == s {
			r.running = append(r.running[:i:i], r.running[i+1:]...)
			break
		}
	}
	r.finishedJobs = append(r.finishedJobs, s)
}

// stopJobs cancels the jobs still running and waits for each to record its
// interrupted result, so every terminal commit has them settled.
func (r *run) stopJobs() {
	if len(r.running) == 0 && len(r.finishedJobs) == 0 {
		return
	}
	for _, j := range r.running {
		j.cancel()
	}
	dctx, _ := workflow.NewDisconnectedContext(r.root)
	_ = workflow.Await(dctx, func() bool { return len(r.running) == 0 })
	for _, j := range r.finishedJobs {
		r.messages = append(r.messages, jobResultMessage(j))
	}
	r.finishedJobs = nil
}

func jobResultMessage(s *slot) keel.Message {
	return keel.Message{Role: keel.RoleUser, ToolCallID: s.call.ID, ToolName: s.call.Name, ToolStatus: s.status,
		Content: fmt.Sprintf("[background job %s (%s) finished: %s]\n%s", s.call.ID, s.call.Name, s.status, s.output)}
}
