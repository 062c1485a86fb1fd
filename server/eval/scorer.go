package eval

import (
	"context"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
)

// Scorer scores one run of a case. Score returns the verdict, or an
// error when it cannot decide, which the eval records as the scorer's
// error: an error never passes.
type Scorer interface {
	// Name names the scorer in reports.
	Name() string
	Score(ctx context.Context, c api.EvalCase, run api.EvalRun) (api.EvalScore, error)
}

// Verdict is a pass (score 1) or a fail (score 0) of scorer name.
func Verdict(name string, pass bool, reason string) api.EvalScore {
	s := api.EvalScore{Scorer: name, Pass: pass, Reason: reason}
	if pass {
		s.Score = 1
	}
	return s
}

// Builtin are the deterministic scorers of a case's expectations: one
// per field e sets, after "completed", which passes a run that
// completed.
func Builtin(e api.EvalExpect) []Scorer {
	s := []Scorer{completed{}}
	if e.Exact != nil {
		s = append(s, exact(*e.Exact))
	}
	if len(e.Contains) > 0 {
		s = append(s, contains(e.Contains))
	}
	if e.Regex != "" {
		s = append(s, pattern(e.Regex))
	}
	if len(e.Schema) > 0 {
		s = append(s, schema(e.Schema))
	}
	if len(e.Tools) > 0 {
		s = append(s, toolCalls(e.Tools))
	}
	if len(e.NoTools) > 0 {
		s = append(s, noTools(e.NoTools))
	}
	if e.MaxCost > 0 || e.MaxTokens > 0 || e.MaxDuration > 0 {
		s = append(s, thresholds(e))
	}
	return s
}

// ScoreRun runs every scorer on run and sums their verdicts into a
// side: a scorer's error is its score's Error, and fails it.
func ScoreRun(ctx context.Context, scorers []Scorer, c api.EvalCase, run api.EvalRun) api.EvalSide {
	side := api.EvalSide{Run: &run}
	for _, sc := range scorers {
		s, err := sc.Score(ctx, c, run)
		if err != nil {
			s = api.EvalScore{Scorer: sc.Name(), Error: err.Error(), Usage: s.Usage}
		}
		if s.Scorer == "" {
			s.Scorer = sc.Name()
		}
		s.Score = min(max(s.Score, 0), 1)
		side.Scores = append(side.Scores, s)
	}
	side.Pass, side.Score = Sum(side.Scores)
	return side
}

// Sum is whether every score passed and their mean; no scores pass with
// score 1.
func Sum(scores []api.EvalScore) (pass bool, mean float64) {
	if len(scores) == 0 {
		return true, 1
	}
	pass = true
	for _, s := range scores {
		pass = pass && s.Pass && s.Error == ""
		mean += s.Score
	}
	return pass, mean / float64(len(scores))
}

// completed passes a run that completed.
type completed struct{}

func (completed) Name() string { return "completed" }

func (completed) Score(_ context.Context, _ api.EvalCase, run api.EvalRun) (api.EvalScore, error) {
	reason := string(run.Status)
	if run.Error != nil {
		reason += ": " + run.Error.Message
	}
	return Verdict("completed", run.Status == keel.StatusCompleted, reason), nil
}
