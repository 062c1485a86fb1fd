package keel

// SessionState is what a session is doing. It is an observation, not a lock:
// use run outcomes and revisions for decisions.
type SessionState string

// The states of a session. Completed and Failed stay until the next run
// starts; a cancelled run returns the session to Idle. Terminated (and
// Failed, for a session whose workflow itself failed) is final.
const (
	StateIdle                SessionState = "idle"
	StateRunning             SessionState = "running"
	StateWaitingForHostInput SessionState = "waiting_for_host_input"
	StateCancelling          SessionState = "cancelling"
	StateCompleted           SessionState = "completed"
	StateFailed              SessionState = "failed"
	// StateTerminated is a session whose workflow was stopped from
	// outside (an operator, or a Temporal limit): it takes no more
	// prompts, and its events and transcript stay readable.
	StateTerminated SessionState = "terminated"
)

// Active reports whether a run is in progress in this state.
func (s SessionState) Active() bool {
	return s == StateRunning || s == StateWaitingForHostInput || s == StateCancelling
}

// RunStatus is how a run ended, or that it has not.
type RunStatus string

// The statuses of a run.
const (
	StatusActive    RunStatus = "active"
	StatusCompleted RunStatus = "completed"
	StatusCancelled RunStatus = "cancelled"
	StatusFailed    RunStatus = "failed"
)
