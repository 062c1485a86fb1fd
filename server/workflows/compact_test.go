package workflows_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/internal/carry"
)

// longTranscript is a committed session transcript of n exchanges.
func longTranscript(n int) []keel.Message {
	var msgs []keel.Message
	for range n {
		msgs = append(msgs, keel.UserMessage(strings.Repeat("question ", 20)),
			keel.Message{Role: keel.RoleAssistant, Content: strings.Repeat("answer ", 20)})
	}
	return msgs
}

// docs/contract.md §2.10: compaction.started comes before the compactor is called,
// compaction.completed after the replacement history is committed; the
// step that follows sees the summary; the session gets the replaced
// transcript.
func TestCompactionBracketsTheCompactor(t *testing.T) {
	// Ten earlier exchanges mean ten turns were played: this run plays
	// turn 11, even after compaction replaced them.
	turns := strings.Repeat(`{"text":["old"]},`, 10)
	env := newRunEnv(t, `{"turns":[`+turns+`{"text":["after compaction"]}]}`)
	in := promptOf("next question")
	in.Carry = &carry.SessionCarry{Transcript: longTranscript(10)}
	in.Config.CompactAt = 200
	res := env.execSession(t, in)

	types := types(res.Events)
	started := slices.Index(types, keel.TypeCompactionStarted)
	completed := slices.Index(types, keel.TypeCompactionCompleted)
	step := slices.Index(types, keel.TypeStepStarted)
	require.True(t, started >= 0 && started < completed && completed < step, "%v", types)
	c := find[keel.CompactionCompleted](t, res.Events)[0]
	require.Equal(t, 21, c.MessagesBefore)
	require.Less(t, c.MessagesAfter, c.MessagesBefore)

	require.True(t, res.Replaced)
	require.Equal(t, "after compaction", res.Outcome.Text)
	kept := 0
	for _, m := range res.Messages[1:] {
		if m.Role == keel.RoleAssistant {
			kept++
		}
	}
	// The summary stands for the turns it replaced; with the ones kept and
	// this run's answer, all eleven are accounted for.
	require.Equal(t, 11, res.Messages[0].CompactedTurns+kept)
	require.Contains(t, res.Messages[0].Content, "Summary of")
	// The compaction request is billed like any other.
	require.Equal(t, 2, res.Outcome.UsageTotal.Requests)
}

// Compaction is skipped while a detached job is pending, and happens at
// the first boundary after it finished.
func TestCompactionSkippedWhileJobsPending(t *testing.T) {
	release := make(chan struct{})
	long := strings.Repeat("lots of words ", 100)
	// Four earlier exchanges played four turns.
	env := newRunEnv(t, `{"turns":[`+strings.Repeat(`{"text":["old"]},`, 4)+`
	  {"text":["`+long+`"],"tool_calls":[{"id":"j","name":"slow_bg","arguments":{}}]},
	  {"text":["waiting for the job"]},
	  {"text":["job done"]}]}`,
		detachedJob("slow_bg", "finished", release))
	in := promptOf("go", "slow_bg")
	in.Carry = &carry.SessionCarry{Transcript: longTranscript(4)}
	in.Config.CompactAt = 600 // passed once turn 1's long text is in history
	// The job finishes after turn 2 ended, while the run waits for it.
	env.closeAfterTurns(release, 2)
	res := env.execSession(t, in)

	types := types(res.Events)
	var steps []int
	for i, ty := range types {
		if ty == keel.TypeStepStarted {
			steps = append(steps, i)
		}
	}
	require.Len(t, steps, 3)
	started := slices.Index(types, keel.TypeCompactionStarted)
	finished := slices.Index(types, keel.TypeToolFinished)
	require.Greater(t, started, steps[1], "no compaction while the job was pending: %v", types)
	require.Greater(t, started, finished)
	require.Less(t, started, steps[2])
	require.Equal(t, "job done", res.Outcome.Text)
}
