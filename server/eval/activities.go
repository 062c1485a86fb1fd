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
}

// CancelCaseRequest names a case whose runs (both sides', and their
// judges') are cancelled.
type CancelCaseRequest struct {
	EvalID string `json:"eval_id"`
	Index  int    `json:"index"`
}
