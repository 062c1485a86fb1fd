package stack

import (
	"flag"
	"fmt"
	"time"

	"github.com/keelrun/keel/server/worker"
)

// Tuning is a worker's capacity and heartbeat settings as flags, the
// same in `keel worker`, `keel dev` and keel-bench's worker. Zero leaves
// worker.Options' default.
type Tuning struct {
	heartbeat        time.Duration
	noCancelWatch    bool
	maxActivities    int
	maxWorkflowTasks int
	workflowPollers  int
	activityPollers  int
	stickyCache      int
}

// Register adds the flags to fs, with worker.Options' defaults.
func (t *Tuning) Register(fs *flag.FlagSet) {
	fs.DurationVar(&t.heartbeat, "heartbeat-interval", worker.DefaultHeartbeatInterval,
		"how often a running activity heartbeats (liveness only; cancellation takes the fast path)")
	fs.BoolVar(&t.noCancelWatch, "no-cancel-watch", false,
		"turn off the fast path of cancellation: activities learn of a cancel from a heartbeat")
	fs.IntVar(&t.maxActivities, "max-activities", worker.DefaultMaxConcurrentActivities,
		"`N` activities (model turns, tool calls) run at once at most")
	fs.IntVar(&t.maxWorkflowTasks, "max-workflow-tasks", worker.DefaultMaxConcurrentWorkflowTasks,
		"`N` workflow tasks run at once at most")
	fs.IntVar(&t.workflowPollers, "workflow-pollers", worker.DefaultWorkflowPollers,
		"`N` long polls kept open for workflow tasks")
	fs.IntVar(&t.activityPollers, "activity-pollers", worker.DefaultActivityPollers,
		"`N` long polls kept open for activity tasks")
	fs.IntVar(&t.stickyCache, "sticky-cache", worker.DefaultStickyCacheSize,
		"`N` workflow executions kept in memory between their tasks")
}

// Check refuses values worker.Options would silently replace.
func (t *Tuning) Check() error {
	if t.heartbeat <= 0 {
		return fmt.Errorf("--heartbeat-interval must be positive, got %v", t.heartbeat)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"max-activities", t.maxActivities}, {"max-workflow-tasks", t.maxWorkflowTasks},
		{"workflow-pollers", t.workflowPollers}, {"activity-pollers", t.activityPollers}, {"sticky-cache", t.stickyCache}} {
		if f.v < 1 {
			return fmt.Errorf("--%s must be at least 1, got %d", f.name, f.v)
		}
	}
	return nil
}

// Apply sets the flags' values on opts.
func (t *Tuning) Apply(opts *worker.Options) {
	opts.HeartbeatInterval = t.heartbeat
	opts.NoCancelWatch = t.noCancelWatch
	opts.MaxConcurrentActivities = t.maxActivities
	opts.MaxConcurrentWorkflowTasks = t.maxWorkflowTasks
	opts.WorkflowPollers = t.workflowPollers
	opts.ActivityPollers = t.activityPollers
	opts.StickyCacheSize = t.stickyCache
}
