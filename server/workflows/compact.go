package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/server/activities"
)

// keepRecent is how many of the latest messages compaction leaves as they
// are (it may keep a few more, to cut at a user message).
const keepRecent = 6

// compactor replaces the older part of a run's transcript with a summary
// the model writes, when the context estimate passes the run's threshold
// (docs/contract.md §9).
type compactor struct {
	cfg              api.RunConfig
	sessionID, runID string
	// root is the run's context; work is cancelled when the run is.
	root, work workflow.Context
	emit       emitFunc
	meter      *meter
	transcript *transcript
}

// maybeCompact compacts at the boundary before step when the estimate
// passed the threshold and no detached job is pending (a job's result must
// find its call in history). compaction.started comes before the compactor
// is called; compaction.completed only after the replacement is installed,
// in the same workflow task, so a cancellation cannot fall between them.
func (c *compactor) maybeCompact(step, toolTokens int, jobsRunning bool) {
	if c.cfg.CompactAt < 0 || jobsRunning {
		return
	}
	msgs := c.transcript.messages
	estimate := keel.EstimateTokens(c.cfg.System, msgs) + toolTokens
	if estimate <= c.cfg.CompactAt {
		return
	}
	cut := compactionCut(msgs)
	if cut <= 1 {
		return
	}
	c.emit(keel.CompactionStarted{EstimatedContextTokens: estimate})
	actx := workflow.WithActivityOptions(c.work, workflow.ActivityOptions{
		StartToCloseTimeout: c.cfg.ModelTimeout.Std(),
		HeartbeatTimeout:    c.cfg.HeartbeatAfter.Std(),
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2,
			MaximumAttempts: maxRequestsPerTurn},
		Summary: fmt.Sprintf("compact %d messages (%s)", cut, c.cfg.Model),
	})
	in := activities.CompactInput{SessionID: c.sessionID, RunID: c.runID, Model: c.cfg.Model,
		Transcript: c.transcript.ref(), Tail: c.transcript.ship(), Cut: cut, Step: step}
	var res activities.CompactResult
	if err := workflow.ExecuteActivity(actx, activities.CompactName, in).Get(c.work, &res); err != nil {
		// Cancelled or failed: the history stays as it was, and no
		// completion is reported for a replacement that never happened.
		workflow.GetLogger(c.root).Warn("compaction failed", "err", err)
		return
	}
	c.meter.request(step, 0, res.Usage)

	before := len(c.transcript.messages)
	c.transcript.replace(cut, summaryMessage(c.transcript.messages[:cut], res.Summary))
	c.emit(keel.CompactionCompleted{MessagesBefore: before, MessagesAfter: len(c.transcript.messages)})
}

// summaryMessage is the message that stands for the replaced ones; it
// carries how many assistant turns they held, compacted ones included.
func summaryMessage(replaced []keel.Message, summary string) keel.Message {
	turns := 0
	for _, m := range replaced {
		turns += m.CompactedTurns
		if m.Role == keel.RoleAssistant && !m.Aborted {
			turns++
		}
	}
	return keel.Message{Role: keel.RoleUser, CompactedTurns: turns,
		Content: "[Summary of the earlier conversation, written when it was compacted]\n" + summary}
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
