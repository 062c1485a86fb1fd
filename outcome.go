package keel

// Outcome is the authoritative result of a run.
type Outcome struct {
	RunID    string    `json:"run_id"`
	Number   int       `json:"number"`
	Status   RunStatus `json:"status"`
	Text     string    `json:"text,omitempty"`
	Steps    int       `json:"steps"`
	Revision int64     `json:"revision"`
	// Usage is the usage of the successful responses; UsageTotal adds the
	// abandoned attempts, which are billed too.
	Usage      Usage  `json:"usage"`
	UsageTotal Usage  `json:"usage_total"`
	Error      *Error `json:"error,omitempty"`
}

// Err returns nil for a completed run, ErrCancelled for a cancelled one, and
// the typed failure otherwise.
func (o Outcome) Err() error {
	switch o.Status {
	case StatusCompleted, StatusActive:
		return nil
	case StatusCancelled:
		return ErrCancelled
	}
	if o.Error != nil {
		return o.Error
	}
	return &Error{Code: CodeInternal, Message: "run failed without a recorded error"}
}
