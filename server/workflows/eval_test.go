package workflows_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/server/eval"
	"github.com/keelrun/keel/server/workflows"
)

// evalEnv runs the Eval workflow with runCase as its case activity.
func evalEnv(t *testing.T, runCase func(context.Context, eval.CaseRequest) (api.EvalSide, error)) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(workflows.EvalWorkflow, workflow.RegisterOptions{Name: api.EvalWorkflowName})
	env.RegisterActivityWithOptions(runCase, activity.RegisterOptions{Name: eval.RunCaseActivity})
	return env
}

func evalCases(n int) []api.EvalCase {
	cases := make([]api.EvalCase, n)
	for i := range cases {
		cases[i] = api.EvalCase{ID: string(rune('a' + i)), Prompt: "p"}
	}
	return cases
}

// An eval stops starting cases once its budget is spent; the cases left
// are skipped and the report says why (docs/contract.md §24.4). It
// never runs more than its concurrency at once (§24.2).
func TestEvalStopsAtItsBudgetWithinItsConcurrency(t *testing.T) {
	var mu sync.Mutex
	running, most, ran := 0, 0, 0
	env := evalEnv(t, func(ctx context.Context, req eval.CaseRequest) (api.EvalSide, error) {
		mu.Lock()
		running++
		ran++
		most = max(most, running)
		mu.Unlock()
		defer func() { mu.Lock(); running--; mu.Unlock() }()
		return api.EvalSide{Pass: true, Score: 1, Run: &api.EvalRun{Status: keel.StatusCompleted,
			Usage: keel.Usage{InputTokens: 40, OutputTokens: 10, Requests: 1}}}, nil
	})
	env.ExecuteWorkflow(api.EvalWorkflowName, api.EvalInput{ID: "budget", Cases: evalCases(10),
		Candidate: api.RunConfig{Model: "m"}, Concurrency: 2, Budget: &api.Budget{MaxTokens: 200}})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var rep api.EvalReport
	require.NoError(t, env.GetWorkflowResult(&rep))
	require.True(t, rep.BudgetSpent)
	require.LessOrEqual(t, most, 2)
	// 50 tokens a case: the budget is reached after 4 cases, and the
	// cases already under way finish.
	require.GreaterOrEqual(t, ran, 4)
	require.LessOrEqual(t, ran, 5)
	require.Equal(t, ran, rep.Candidate.Passed)
	require.Equal(t, 10-ran, rep.Candidate.Skipped)
	require.InDelta(t, 1.0, rep.Candidate.PassRate, 1e-9)
}

// Each case's side is told what is left of the eval's budget when the
// case starts, for its run's budget (eval.RunBudget), so a run that goes
// on and on stops at the eval's budget rather than after it.
func TestEvalCapsEachRunAtWhatIsLeft(t *testing.T) {
	var mu sync.Mutex
	var got []int64
	env := evalEnv(t, func(ctx context.Context, req eval.CaseRequest) (api.EvalSide, error) {
		mu.Lock()
		got = append(got, req.Left.MaxTokens)
		mu.Unlock()
		return api.EvalSide{Pass: true, Score: 1, Run: &api.EvalRun{Status: keel.StatusCompleted,
			Usage: keel.Usage{InputTokens: 40, OutputTokens: 10, Requests: 1}}}, nil
	})
	env.ExecuteWorkflow(api.EvalWorkflowName, api.EvalInput{ID: "caps", Cases: evalCases(5),
		Candidate: api.RunConfig{Model: "m", Budget: &api.Budget{MaxTokens: 120}}, Concurrency: 1,
		Budget: &api.Budget{MaxTokens: 200}})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []int64{200, 150, 100, 50}, got)
}

// A case whose activity fails past its retries is the side's error, not
// the eval's; an input over its limits fails the eval before any case.
func TestEvalCaseErrorsAndRefusedInput(t *testing.T) {
	env := evalEnv(t, func(ctx context.Context, req eval.CaseRequest) (api.EvalSide, error) {
		if req.Case.ID == "b" {
			return api.EvalSide{}, &keel.Error{Code: keel.CodeInvalidInput, Message: "model: not offered by this worker"}
		}
		return api.EvalSide{Pass: true, Score: 1, Run: &api.EvalRun{Status: keel.StatusCompleted}}, nil
	})
	env.ExecuteWorkflow(api.EvalWorkflowName, api.EvalInput{ID: "errs", Cases: evalCases(3), Candidate: api.RunConfig{Model: "m"}})
	var rep api.EvalReport
	require.NoError(t, env.GetWorkflowResult(&rep))
	require.Equal(t, 2, rep.Candidate.Passed)
	require.Equal(t, 1, rep.Candidate.Errors)
	require.Equal(t, "b", rep.Cases[0].ID, "failures first")
	require.NotNil(t, rep.Cases[0].Candidate.Error)

	env = evalEnv(t, func(context.Context, eval.CaseRequest) (api.EvalSide, error) { return api.EvalSide{}, nil })
	env.ExecuteWorkflow(api.EvalWorkflowName, api.EvalInput{ID: "bad id!", Cases: evalCases(1)})
	require.Error(t, env.GetWorkflowError())
	require.ErrorContains(t, env.GetWorkflowError(), "eval ID")
}
