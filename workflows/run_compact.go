package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/activities"
)

// keepRecent is how many of the latest messages compaction leaves as they
// are (it may keep a few more, to cut at a user message).
const keepRecent = 6

// transcriptRef names the run's current transcript for an activity.
func (r *run) transcriptRef() activities.TranscriptRef {
	return activities.TranscriptRef{WorkflowID: r.exec.ID, RunID: r.exec.RunID, Len: len(r.messages),
		Generation: r.generation}
}

// maybeCompact compacts the history at a step boundary when the context
// estimate passed the threshold and no detached job is pending (a job's
// result must find its call in history). compaction.started comes before
// the compactor is called; compaction.completed only after the replacement
// history is committed, which happens in the same workflow task, so a
// cancellation cannot fall between them.
func (r *run) maybeCompact() {
	if r.cfg.CompactAt < 0 || len(r.running) > 0 {
		return
	}
	estimate := keel.EstimateTokens(r.cfg.System, r.messages) + r.toolTokens
	if estimate <= r.cfg.CompactAt {
		return
	}
	cut := compactionCut(r.messages)
	if cut <= 1 {
		return
	}
	r.emit(keel.CompactionStarted{EstimatedContextTokens: estimate})
	actx := workflow.WithActivityOptions(r.work, workflow.ActivityOptions{
		StartToCloseTimeout: r.cfg.ModelTimeout.Std(),
		HeartbeatTimeout:    r.cfg.HeartbeatAfter.Std(),
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2,
			MaximumAttempts: MaxRequestsPerTurn},
		Summary: fmt.Sprintf("compact %d messages (%s)", cut, r.cfg.Model),
	})
	in := activities.CompactInput{SessionID: r.in.SessionID, RunID: r.in.RunID, Model: r.cfg.Model,
		Transcript: r.transcriptRef(), Tail: r.messages[r.shipped:], Cut: cut}
	r.shipped = len(r.messages)
	var res activities.CompactResult
	if err := workflow.ExecuteActivity(actx, activities.CompactName, in).Get(r.work, &res); err != nil {
		// Cancelled or failed: the history stays as it was, and no
		// completion is reported for a replacement that never happened.
		workflow.GetLogger(r.root).Warn("compaction failed", "err", err)
		return
	}
	u := res.Usage
	u.Requests = 1
	r.usageTotal = r.usageTotal.Add(u)
	r.emit(keel.UsageUpdated{Step: r.step, Usage: u, Total: r.usageTotal})

	turns := 0
	for _, m := range r.messages[:cut] {
		turns += m.CompactedTurns
		if m.Role == keel.RoleAssistant && !m.Aborted {
			turns++
		}
	}
	before := len(r.messages)
	summary := keel.Message{Role: keel.RoleUser, CompactedTurns: turns,
		Content: "[Summary of the earlier conversation, written when it was compacted]\n" + res.Summary}
	r.messages = append([]keel.Message{summary}, r.messages[cut:]...)
	r.base, r.generation, r.shipped = -1, r.generation+1, 0
	r.emit(keel.CompactionCompleted{MessagesBefore: before, MessagesAfter: len(r.messages)})
}

// compactionCut picks how many leading messages to summarize: all but the
// last keepRecent or so, cut just before a user message so that no tool
// result is separated from its call.
func compactionCut(msgs []keel.Message) int {
	for i := len(msgs) - keepRecent; i > 0; i-- {
		if msgs[i].Role == keel.RoleUser && msgs[i].ToolCallID == "" {
			return i
		}
	}
	return 0
}
