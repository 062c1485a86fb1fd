package workflows

import (
	"github.com/keelrun/keel"
)

// checkText refuses an empty text or one over MaxPromptBytes; what names
// it in the error ("prompt", "steering text").
func checkText(what, text string) error {
	switch {
	case text == "":
		return wireError(keel.Errorf(keel.CodeInvalidInput, "%s is empty", what))
	case len(text) > MaxPromptBytes:
		return wireError(keel.Errorf(keel.CodeInvalidInput, "%s is %d bytes; the limit is %d", what, len(text), MaxPromptBytes))
	}
	return nil
}

// runStateSignal tells the session what its active run is doing.
type runStateSignal struct {
	RunID string            `json:"run_id"`
	State keel.SessionState `json:"state"`
}

// signalRunState is the run → session signal carrying runStateSignal.
const signalRunState = "run_state"
