package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/server/eval"
)

// An eval (docs/evals.md, docs/contract.md §24) is a workflow of its
// own: its cases' runs are sessions of their own, each side of a case
// one activity that runs and scores it (server/worker/eval.go), so a
// finished case is in history and a restarted worker goes on with the
// cases that were not. At most in.Concurrency cases run at once; a
// case's runs may spend what is left of the eval's budget when it
// starts, and once the budget is spent no case starts. Cancelled, it
// waits for its running cases' activities to cancel their runs, and
// returns the report of what finished.

// Timeouts of the eval's activities.
const (
	// evalCaseTimeout bounds one attempt of one side of a case: its run
	// may wait long for a busy worker or its rate limits.
	evalCaseTimeout = 24 * time.Hour
	// evalCaseHeartbeat is how long an attempt may go without a
	// heartbeat before another worker takes it.
	evalCaseHeartbeat = time.Minute
	// evalCaseAttempts bounds the attempts of one side of a case; what
	// fails past it is the side's error.
	evalCaseAttempts = 5
)

// EvalWorkflow runs an eval and returns its report.
func EvalWorkflow(ctx workflow.Context, in api.EvalInput) (*api.EvalReport, error) {
	if err := in.Validate(); err != nil {
		var ke *keel.Error
		if errors.As(err, &ke) {
			return nil, wireError(ke)
		}
		return nil, err
	}
	for i, c := range in.Cases {
		// A schema compiles here, where its checks are bounded
		// (tool.CheckSchema); a remote reference is never fetched.
		if err := CheckOutputSchema(c.Expect.Schema); err != nil {
			return nil, wireError(keel.Errorf(err.Code, "case %d: expect.schema: %s", i+1, err.Message))
		}
	}
	st := api.EvalStatus{ID: in.ID, State: api.EvalRunning}
	if err := workflow.SetQueryHandler(ctx, api.QueryState, func() (api.EvalStatus, error) { return st, nil }); err != nil {
		return nil, err
	}
	cases := in.Cases
	if len(in.Sessions) > 0 || in.SessionPrefix != "" {
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: 10 * time.Minute,
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: evalCaseAttempts,
				NonRetryableErrorTypes: []string{string(keel.CodeInvalidInput), string(keel.CodeTooLarge), string(keel.CodeNotFound)}},
			Summary: fmt.Sprintf("eval %s: read %d recorded sessions", in.ID, len(in.Sessions)),
		})
		var recorded []api.EvalCase
		req := eval.RecordedCasesRequest{Sessions: in.Sessions, Prefix: in.SessionPrefix, Exclude: in.ID + "-",
			Max: api.MaxEvalCases - len(cases)}
		if err := workflow.ExecuteActivity(actx, eval.RecordedCasesActivity, req).Get(ctx, &recorded); err != nil {
			return nil, err
		}
		cases = append(cases[:len(cases):len(cases)], recorded...)
	}
	st.Total = len(cases)
	results := make([]api.EvalCaseResult, len(cases))
	for i, c := range cases {
		results[i] = api.EvalCaseResult{Index: i, ID: c.ID, Prompt: clip(c.Prompt, 2000), From: c.From,
			Candidate: api.EvalSide{Skipped: true}}
		if hasBaseline(in, c) {
			results[i].Baseline = &api.EvalSide{Skipped: true}
		}
	}
	limit := in.Concurrency
	if limit == 0 {
		limit = api.DefaultEvalConcurrency
	}
	budgetSpent := false
	started := make([]bool, len(cases))
	for i := range cases {
		if err := workflow.Await(ctx, func() bool { return st.Running < limit }); err != nil {
			break // cancelled
		}
		if budgetSpent = spent(in.Budget, st.Usage); budgetSpent {
			break
		}
		st.Running++
		started[i] = true
		left := remaining(in.Budget, st.Usage)
		workflow.Go(ctx, func(gctx workflow.Context) {
			runCase(gctx, in, i, cases[i], left, &results[i])
			st.Running--
			st.Done++
			if results[i].Candidate.Pass {
				st.Passed++
			} else {
				st.Failed++
			}
			st.Usage = st.Usage.Add(sideUsage(results[i].Candidate, true))
			if b := results[i].Baseline; b != nil {
				// A recorded run was paid for when it ran.
				st.Usage = st.Usage.Add(sideUsage(*b, cases[i].From == nil))
			}
		})
	}
	// The cases under way finish, or cancel, whatever happened to the
	// eval.
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	_ = workflow.Await(dctx, func() bool { return st.Running == 0 })
	if ctx.Err() != nil {
		cancelCases(dctx, in.ID, started, results)
	}
	report := eval.Report(in.ID, results, budgetSpent)
	report.Cancelled = ctx.Err() != nil
	st.State = api.EvalCompleted
	if report.Cancelled {
		st.State = api.EvalCancelled
	}
	return &report, nil
}

// cancelCases cancels the runs of the cases a cancelled eval stopped
// mid-way: a case's activity leaves its runs alone when it ends, so that
// a retried attempt follows them (docs/contract.md §24.3).
func cancelCases(ctx workflow.Context, evalID string, started []bool, results []api.EvalCaseResult) {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	})
	var pending []workflow.Future
	for i, r := range results {
		stopped := r.Candidate.Skipped || r.Baseline != nil && r.Baseline.Skipped
		if started[i] && stopped {
			pending = append(pending, workflow.ExecuteActivity(actx, eval.CancelCaseActivity,
				eval.CancelCaseRequest{EvalID: evalID, Index: i}))
		}
	}
	for _, f := range pending {
		_ = f.Get(ctx, nil) // a run left going ends as runs do
	}
}

// hasBaseline reports whether case c has a baseline side: a recorded run
// (its original), or any case of an eval with a baseline configuration.
func hasBaseline(in api.EvalInput, c api.EvalCase) bool { return c.From != nil || in.Baseline != nil }

// runCase runs case i's sides at once, and records them in res.
func runCase(ctx workflow.Context, in api.EvalInput, i int, c api.EvalCase, left *api.Budget, res *api.EvalCaseResult) {
	side := func(name string, cfg *api.RunConfig) workflow.Future {
		sctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: evalCaseTimeout,
			HeartbeatTimeout:    evalCaseHeartbeat,
			// A cancelled case's activity cancels its run first.
			WaitForCancellation: true,
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: evalCaseAttempts,
				NonRetryableErrorTypes: []string{string(keel.CodeInvalidInput), string(keel.CodeTooLarge)}},
			Summary: fmt.Sprintf("eval %s · case %d (%s) · %s", in.ID, i+1, clip(c.ID, 60), sideName(name)),
		})
		return workflow.ExecuteActivity(sctx, eval.RunCaseActivity,
			eval.CaseRequest{EvalID: in.ID, Index: i, Side: name, Case: c, Config: cfg, Judge: in.Judge, Left: left})
	}
	cand := in.Candidate
	candF := side(eval.SideCandidate, &cand)
	var baseF workflow.Future
	switch {
	case c.From != nil:
		baseF = side(eval.SideBaseline, nil)
	case in.Baseline != nil:
		base := *in.Baseline
		baseF = side(eval.SideBaseline, &base)
	}
	res.Candidate = sideResult(ctx, candF)
	if baseF != nil {
		b := sideResult(ctx, baseF)
		res.Baseline = &b
	}
}

// sideResult waits for a side's activity: a side that failed past its
// retries is its error, one cancelled is skipped.
func sideResult(ctx workflow.Context, f workflow.Future) api.EvalSide {
	var s api.EvalSide
	err := f.Get(ctx, &s)
	var canceled *temporal.CanceledError
	switch {
	case err == nil:
		return s
	case errors.As(err, &canceled) || ctx.Err() != nil:
		return api.EvalSide{Skipped: true}
	}
	msg := err.Error()
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		var ke keel.Error
		if app.HasDetails() && app.Details(&ke) == nil && ke.Code != "" {
			return api.EvalSide{Error: &ke}
		}
		msg = app.Message()
	}
	return api.EvalSide{Error: &keel.Error{Code: keel.CodeInternal, Message: clip(msg, 500)}}
}

func sideName(s string) string {
	if s == eval.SideBaseline {
		return "baseline"
	}
	return "candidate"
}

// sideUsage is what a side spent: its judge, and its run with run.
func sideUsage(s api.EvalSide, run bool) keel.Usage {
	var u keel.Usage
	if run && s.Run != nil {
		u = s.Run.Usage
	}
	for _, sc := range s.Scores {
		if sc.Usage != nil {
			u = u.Add(*sc.Usage)
		}
	}
	return u
}

// remaining is what is left of budget b after usage: a case's runs may
// spend at most that (eval.RunBudget), so a run that goes on and on
// stops at the eval's budget, not after it. Nil when b limits nothing.
func remaining(b *api.Budget, u keel.Usage) *api.Budget {
	if b.IsZero() {
		return nil
	}
	left := api.Budget{MaxTokens: b.MaxTokens, WarnAt: b.WarnAt}
	if b.MaxTokens > 0 {
		left.MaxTokens = max(b.MaxTokens-u.InputTokens-u.OutputTokens, 1)
	}
	if b.Max > 0 {
		nanos := max(b.MaxNanos()-u.Cost.In(b.Currency), 1)
		left.Max, left.Currency = float64(nanos)/1e9, b.Currency
	}
	return &left
}

// spent reports whether usage reached budget b.
func spent(b *api.Budget, u keel.Usage) bool {
	if b.IsZero() {
		return false
	}
	if b.MaxTokens > 0 && u.InputTokens+u.OutputTokens >= b.MaxTokens {
		return true
	}
	return b.Max > 0 && u.Cost.In(b.Currency) >= b.MaxNanos()
}
