package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/activities"
)

// transcript is what a run's model reads: the session's messages, then the
// run's own. Activities fetch it by reference (activities.TranscriptRef),
// so each turn ships only the messages added since the last one.
type transcript struct {
	exec     workflow.Execution
	messages []keel.Message
	// shipped counts the messages an activity has already been sent.
	shipped int
	// base is where the run's own messages start; -1 once a compaction
	// replaced the session's part.
	base int
	// generation counts compactions (see activities.TranscriptRef).
	generation int
}

func newTranscript(exec workflow.Execution, session []keel.Message) *transcript {
	return &transcript{exec: exec, messages: append([]keel.Message(nil), session...), base: len(session)}
}

func (t *transcript) add(msgs ...keel.Message) { t.messages = append(t.messages, msgs...) }

// ref names the transcript as it stands for an activity.
func (t *transcript) ref() activities.TranscriptRef {
	return activities.TranscriptRef{WorkflowID: t.exec.ID, RunID: t.exec.RunID, Len: len(t.messages),
		Generation: t.generation}
}

// ship returns the messages not yet sent to an activity and counts them
// as sent.
func (t *transcript) ship() []keel.Message {
	tail := t.messages[t.shipped:]
	t.shipped = len(t.messages)
	return tail
}

// prefix answers the transcript query: the first n messages.
func (t *transcript) prefix(n int) ([]keel.Message, error) {
	if n < 0 || n > len(t.messages) {
		return nil, fmt.Errorf("transcript has %d messages, %d asked", len(t.messages), n)
	}
	return t.messages[:n], nil
}

// replace puts summary in place of the first cut messages.
func (t *transcript) replace(cut int, summary keel.Message) {
	t.messages = append([]keel.Message{summary}, t.messages[cut:]...)
	t.base, t.generation, t.shipped = -1, t.generation+1, 0
}

// result is what the session commits: the run's own messages, or the whole
// transcript when a compaction replaced the session's part.
func (t *transcript) result() (msgs []keel.Message, replaced bool) {
	if t.base < 0 {
		return t.messages, true
	}
	return t.messages[t.base:], false
}
