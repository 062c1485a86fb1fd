package workflows

import (
	"github.com/keelrun/keel"
)

// checkText refuses an empty text (keel.InvalidInput) or one over limit
// bytes (keel.TooLarge); what names it in the error ("prompt", "steering
// text").
func checkText(what, text string, limit int) error {
	switch {
	case text == "":
		return wireError(keel.Errorf(keel.CodeInvalidInput, "%s is empty", what))
	case len(text) > limit:
		return tooLarge(what, len(text), limit)
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
