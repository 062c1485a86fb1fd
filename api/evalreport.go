package api

import (
	"encoding/json"

	"github.com/keelrun/keel"
)

// EvalRun is what one run of a case did, as the eval read it from the
// run's session log.
type EvalRun struct {
	// Session is the session the run ran in; RunID the run.
	Session string         `json:"session"`
	RunID   string         `json:"run_id,omitempty"`
	Model   string         `json:"model,omitempty"`
	Status  keel.RunStatus `json:"status"`
	// Answer is the run's final text, cut to MaxEvalAnswerBytes in a
	// report (AnswerCut), scored whole.
	Answer    string `json:"answer"`
	AnswerCut bool   `json:"answer_cut,omitempty"`
	// Tools are the run's tool calls in the order they appeared.
	Tools []EvalToolCall `json:"tools,omitempty"`
	// Usage counts every request of the run, abandoned attempts too.
	Usage keel.Usage `json:"usage"`
	// Duration is from the run's first durable event to its last.
	Duration keel.Duration `json:"duration"`
	// Error is the run's failure, for a run that failed.
	Error *keel.Error `json:"error,omitempty"`
}

// EvalToolCall is one tool call of a run.
type EvalToolCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Status is how the call ended: "ok", "error", "unavailable",
	// "interrupted", or where it is.
	Status string `json:"status"`
}

// EvalScore is one scorer's verdict on a run. A scorer that could not
// decide (its own error, a judge that gave no valid verdict) has Error
// set and Pass false: an error never passes.
type EvalScore struct {
	Scorer string `json:"scorer"`
	Pass   bool   `json:"pass"`
	// Score is in [0, 1]: 1 or 0 for a pass or fail scorer, the judge's
	// grade for a judge.
	Score  float64 `json:"score"`
	Reason string  `json:"reason,omitempty"`
	Error  string  `json:"error,omitempty"`
	// Usage is what the scorer spent (a judge's run), counted in the
	// eval's totals and budget.
	Usage *keel.Usage `json:"usage,omitempty"`
}

// EvalSide is one side (candidate or baseline) of a case: its run and
// its scores.
type EvalSide struct {
	Run    *EvalRun    `json:"run,omitempty"`
	Scores []EvalScore `json:"scores,omitempty"`
	// Score is the mean of Scores; Pass says every scorer passed.
	Score float64 `json:"score"`
	Pass  bool    `json:"pass"`
	// Error says the case could not run on this side (its send was
	// refused, a recorded run was not found).
	Error *keel.Error `json:"error,omitempty"`
	// Skipped says the case did not run: the eval's budget was spent,
	// or the eval was cancelled first.
	Skipped bool `json:"skipped,omitempty"`
}

// The changes of a case from baseline to candidate.
const (
	EvalRegressed = "regressed"
	EvalImproved  = "improved"
	EvalSame      = "same"
)

// EvalCaseResult is a case's outcome on both sides.
type EvalCaseResult struct {
	// Index is the case's place in the eval's cases, from 0.
	Index     int         `json:"index"`
	ID        string      `json:"id"`
	Prompt    string      `json:"prompt"`
	From      *EvalSource `json:"from,omitempty"`
	Candidate EvalSide    `json:"candidate"`
	Baseline  *EvalSide   `json:"baseline,omitempty"`
	// Change is EvalRegressed, EvalImproved or EvalSame, with a baseline.
	Change string `json:"change,omitempty"`
}

// EvalTotals sum one side over every case.
type EvalTotals struct {
	Cases   int `json:"cases"`
	Passed  int `json:"passed"`
	Failed  int `json:"failed"`
	Errors  int `json:"errors"`
	Skipped int `json:"skipped"`
	// PassRate is Passed over the cases that ran (not Skipped).
	PassRate  float64 `json:"pass_rate"`
	MeanScore float64 `json:"mean_score"`
	// Histogram counts the cases' scores in ten buckets: [0, 0.1), …,
	// [0.9, 1].
	Histogram [10]int `json:"histogram"`
	// Usage sums the runs; JudgeUsage the judge's.
	Usage      keel.Usage `json:"usage"`
	JudgeUsage keel.Usage `json:"judge_usage"`
	// DurationP50 and DurationP99 are of the runs' durations.
	DurationP50 keel.Duration `json:"duration_p50"`
	DurationP99 keel.Duration `json:"duration_p99"`
}

// EvalReport is an eval's result: every case, regressions first, and
// the totals of each side.
type EvalReport struct {
	ID        string           `json:"id"`
	Cases     []EvalCaseResult `json:"cases"`
	Candidate EvalTotals       `json:"candidate"`
	Baseline  *EvalTotals      `json:"baseline,omitempty"`
	// Regressions and Improvements count the cases so changed.
	Regressions  int `json:"regressions"`
	Improvements int `json:"improvements"`
	// BudgetSpent says the eval's budget stopped it before every case
	// ran.
	BudgetSpent bool `json:"budget_spent,omitempty"`
	// Cancelled says the eval was cancelled: the cases that had not
	// finished are skipped.
	Cancelled bool `json:"cancelled,omitempty"`
}

// The states of an eval.
const (
	EvalRunning   = "running"
	EvalCompleted = "completed"
	EvalCancelled = "cancelled"
	EvalFailed    = "failed"
)

// EvalStatus is an eval's progress: the "state" query's answer while it
// runs, and what keel eval status prints.
type EvalStatus struct {
	ID    string `json:"id"`
	State string `json:"state"`
	// Total counts the cases, known once recorded sessions were read;
	// Done those finished on every side, Running those under way.
	Total   int `json:"total"`
	Done    int `json:"done"`
	Running int `json:"running"`
	// Passed and Failed count the candidate's finished cases.
	Passed int `json:"passed"`
	Failed int `json:"failed"`
	// Usage is what the eval spent so far, judge included.
	Usage keel.Usage `json:"usage"`
	// Error says why an eval failed.
	Error *keel.Error `json:"error,omitempty"`
}
