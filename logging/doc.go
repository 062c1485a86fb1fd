// Package logging builds keel's logger: one *zap.Logger that the worker,
// its activities, `keel dev` (with its embedded Temporal server), the HTTP
// gateway and the Temporal SDK all write to, as JSON or as console text,
// from a chosen level up.
//
// Records about a run carry the same four fields whoever writes them:
// session_id, run_id, step and attempt (ForRun); records that know only a
// workflow ID derive the first two from it (ForWorkflow, and the Temporal
// SDK's records through Temporal).
//
//	l, err := logging.New(logging.Options{Format: logging.FormatJSON, Level: zapcore.InfoLevel})
//	if err != nil {
//		return err
//	}
//	c, err := client.Dial(ctx, client.Options{Logger: logging.Temporal(l)})
//	…
//	logging.ForRun(l, "s1", "s1/run-1", 2, 1).Info("model turn finished")
package logging
