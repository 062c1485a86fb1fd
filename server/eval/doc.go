// Package eval scores what an eval's runs did (docs/evals.md): the
// Scorer interface, the deterministic scorers an EvalExpect names, the
// judge's prompt and verdict, and the report an eval's results sum to.
// It does no I/O, so the Eval workflow builds its report with it.
//
// A worker's own scorer is a Scorer:
//
//	type polite struct{}
//
//	func (polite) Name() string { return "polite" }
//	func (polite) Score(_ context.Context, _ api.EvalCase, run api.EvalRun) (api.EvalScore, error) {
//		ok := strings.Contains(run.Answer, "please")
//		return eval.Verdict("polite", ok, "asks nicely"), nil
//	}
//
// and runs on every case of every eval once it is in the worker's
// options (worker.Options.Scorers).
package eval
