package eval

import (
	"cmp"
	"slices"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
)

// Report sums an eval's case results (in the order of its cases) into
// its report: the totals of each side, each case's change from
// baseline to candidate, and the cases ordered regressions first, then
// the candidate's failures, then the rest, each in case order. It is
// deterministic, so the Eval workflow calls it.
func Report(id string, results []api.EvalCaseResult, budgetSpent bool) api.EvalReport {
	r := api.EvalReport{ID: id, BudgetSpent: budgetSpent, Cases: slices.Clone(results)}
	hasBaseline := false
	for i := range r.Cases {
		c := &r.Cases[i]
		if c.Baseline == nil {
			continue
		}
		hasBaseline = true
		c.Change = Change(c.Candidate, *c.Baseline)
		switch c.Change {
		case api.EvalRegressed:
			r.Regressions++
		case api.EvalImproved:
			r.Improvements++
		}
	}
	r.Candidate = Totals(r.Cases, func(c api.EvalCaseResult) *api.EvalSide { return &c.Candidate })
	if hasBaseline {
		t := Totals(r.Cases, func(c api.EvalCaseResult) *api.EvalSide { return c.Baseline })
		r.Baseline = &t
	}
	rank := func(c api.EvalCaseResult) int {
		switch {
		case c.Change == api.EvalRegressed:
			return 0
		case !c.Candidate.Pass && !c.Candidate.Skipped:
			return 1
		}
		return 2
	}
	slices.SortStableFunc(r.Cases, func(a, b api.EvalCaseResult) int {
		return cmp.Or(cmp.Compare(rank(a), rank(b)), cmp.Compare(a.Index, b.Index))
	})
	return r
}

// Change is how a case changed from base to cand: a pass lost or a lower
// score regressed, a pass won or a higher score improved. A side that
// did not run changes nothing.
func Change(cand, base api.EvalSide) string {
	switch {
	case cand.Skipped || base.Skipped:
		return ""
	case base.Pass && !cand.Pass:
		return api.EvalRegressed
	case !base.Pass && cand.Pass:
		return api.EvalImproved
	case cand.Score < base.Score-scoreEpsilon:
		return api.EvalRegressed
	case cand.Score > base.Score+scoreEpsilon:
		return api.EvalImproved
	}
	return api.EvalSame
}

// scoreEpsilon is the least change of score that counts.
const scoreEpsilon = 1e-9

// Totals sums the side that side picks of each case (nil: none).
func Totals(cases []api.EvalCaseResult, side func(api.EvalCaseResult) *api.EvalSide) api.EvalTotals {
	var t api.EvalTotals
	var durations []time.Duration
	var scoreSum float64
	for _, c := range cases {
		s := side(c)
		if s == nil {
			continue
		}
		t.Cases++
		if s.Skipped {
			t.Skipped++
			continue
		}
		switch {
		case s.Pass:
			t.Passed++
		case s.Error != nil || hasScorerError(s.Scores):
			t.Errors++
		default:
			t.Failed++
		}
		scoreSum += s.Score
		t.Histogram[min(int(s.Score*10), 9)]++
		for _, sc := range s.Scores {
			if sc.Usage != nil {
				t.JudgeUsage = t.JudgeUsage.Add(*sc.Usage)
			}
		}
		if s.Run != nil {
			t.Usage = t.Usage.Add(s.Run.Usage)
			durations = append(durations, s.Run.Duration.Std())
		}
	}
	if ran := t.Cases - t.Skipped; ran > 0 {
		t.PassRate = float64(t.Passed) / float64(ran)
		t.MeanScore = scoreSum / float64(ran)
	}
	slices.Sort(durations)
	t.DurationP50 = keel.Duration(Percentile(durations, 0.50))
	t.DurationP99 = keel.Duration(Percentile(durations, 0.99))
	return t
}

func hasScorerError(scores []api.EvalScore) bool {
	return slices.ContainsFunc(scores, func(s api.EvalScore) bool { return s.Error != "" })
}

// Percentile is the q-th percentile of sorted by the nearest rank; 0
// for none.
func Percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
