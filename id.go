package keel

import "fmt"

// MaxIDLength bounds session IDs.
const MaxIDLength = 128

// ValidateSessionID checks that id can name a session: 1 to 128 characters
// of letters, digits, '-' and '_'. The limit keeps IDs usable as Temporal
// workflow IDs and as NATS subject tokens.
func ValidateSessionID(id string) error {
	if id == "" || len(id) > MaxIDLength {
		return Errorf(CodeInvalidInput, "session ID must be 1 to %d characters, got %d", MaxIDLength, len(id))
	}
	for i, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return Errorf(CodeInvalidInput, "session ID %q has %q at byte %d; use letters, digits, '-' and '_'", id, r, i)
		}
	}
	return nil
}

// RunID returns the ID of run number n of a session, which is also the Run
// workflow's ID.
func RunID(sessionID string, n int) string { return fmt.Sprintf("%s/run-%d", sessionID, n) }
