package eval

import "github.com/keelrun/keel/api"

// What the Eval workflow asks of a worker's eval activities
// (server/worker/eval.go): their names and inputs. Both sides are
// keel's own, so these may change with any release.

// Names of the eval's activities.
const (
	// RecordedCasesActivity reads recorded sessions' committed runs as
	// cases (RecordedCasesRequest → []api.EvalCase).
	RecordedCasesActivity = "EvalRecordedCases"
	// RunCaseActivity runs one side of a case and scores it
	// (CaseRequest → api.EvalSide).
	RunCaseActivity = "EvalRunCase"
	// CancelCaseActivity cancels the runs of a case that an eval's
	// cancellation stopped (CancelCaseRequest).
	CancelCaseActivity = "EvalCancelCase"
)

// The sides of a case, as its session IDs name them
// (api.EvalCaseSessionID).
const (
	SideCandidate = "c"
	SideBaseline  = "b"
)

// RecordedCasesRequest names the recorded sessions of an eval.
type RecordedCasesRequest struct {
	Sessions []string `json:"sessions"`
	// Prefix adds the sessions whose IDs start with it, but those
	// starting with Exclude (the eval's own).
	Prefix  string `json:"prefix,omitempty"`
	Exclude string `json:"exclude,omitempty"`
	// Max bounds the cases returned: more is refused with
	// keel.CodeTooLarge.
	Max int `json:"max"`
}

// CaseRequest is one side of one case.
type CaseRequest struct {
	EvalID string       `json:"eval_id"`
	Index  int          `json:"index"`
	Side   string       `json:"side"`
	Case   api.EvalCase `json:"case"`
	// Config is the side's run configuration; nil for a recorded case's
	// baseline, which is the original run, read and not run again.
	Config *api.RunConfig `json:"config,omitempty"`
	Judge  *api.EvalJudge `json:"judge,omitempty"`
	// Left is what was left of the eval's budget when the case started;
	// nil when the eval has none. The side's run spends at most that
	// (RunBudget).
	Left *api.Budget `json:"left,omitempty"`
}

// RunBudget is the budget of a case's run: its own (or, without one,
// the worker's ceiling, which the run would get) tightened to left, what
// is left of the eval's, each limit the lower of the two. A money limit
// of left in another currency than the run's stays out: a run's budget
// is in its ceiling's currency.
func RunBudget(own, left, ceiling *api.Budget) *api.Budget {
	if left.IsZero() {
		return own
	}
	base := own
	if base.IsZero() {
		base = ceiling
	}
	var b api.Budget
	if base != nil {
		b = *base
	}
	if left.MaxTokens > 0 && (b.MaxTokens == 0 || left.MaxTokens < b.MaxTokens) {
		b.MaxTokens = left.MaxTokens
	}
	if left.Max > 0 {
		switch {
		case b.Max == 0 && (ceiling == nil || ceiling.Max == 0 || ceiling.Currency == left.Currency):
			b.Max, b.Currency = left.Max, left.Currency
		case b.Max > 0 && b.Currency == left.Currency && left.Max < b.Max:
			b.Max = left.Max
		}
	}
	if b.IsZero() {
		return own
	}
	return &b
}

// CancelCaseRequest names a case whose runs (both sides', and their
// judges') are cancelled.
type CancelCaseRequest struct {
	EvalID string `json:"eval_id"`
	Index  int    `json:"index"`
}
