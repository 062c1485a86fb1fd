package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
)

// keel eval: evals over datasets and recorded sessions (docs/evals.md,
// docs/contract.md §24).

const evalDesc = `Runs evals: each case of a dataset, and each run of recorded sessions
(forked at that run, so the candidate sees the history the original saw),
runs as a session of its own under the candidate's configuration, and
under the baseline's; each run is scored, and the report compares the two
sides. An eval is a workflow: it survives a restart of keel dev or of the
workers, and goes on without running finished cases again.`

var evalCommands = []command{
	{"run", "start an eval, show its progress and print its report", cmdEvalRun},
	{"status", "show an eval's progress", cmdEvalStatus},
	{"report", "wait for an eval's end and print its report", cmdEvalReport},
	{"cancel", "cancel an eval: no case starts, running cases' runs are cancelled", cmdEvalCancel},
}

func cmdEval(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runGroup(ctx, "eval", "COMMAND [flags]", evalDesc, evalCommands, args, stdout, stderr)
}

const evalRunDesc = `Starts an eval and follows it: a progress bar on a terminal's stderr, then
the report (a table, or JSON with --json). The candidate is the run
configuration the run flags (--model, --agent, --tools, --max-steps,
--budget, --output-schema, --reasoning-*, --hook) say; the baseline is
--baseline-model or --baseline-agent for dataset cases, and the original
run for recorded ones. Cases come from --dataset FILE (JSON Lines, read
and checked here: docs/evals.md) and --sessions LIST. With --fail-under
F the exit status is 1 when the candidate's pass rate is below F, for CI.
Interrupted, the eval goes on: "keel eval report ID" prints it later.`

// evalRunFlags are keel eval run's own flags.
type evalRunFlags struct {
	id, dataset                 string
	sessions                    listFlag
	sessionPrefix, schedule     string
	baselineModel, baselineAgnt string
	judgeModel, rubric          string
	concurrency                 int
	evalBudget                  budgetFlag
	failUnder                   float64
	asJSON                      bool
}

func (f *evalRunFlags) register(fs *flagSet) {
	fs.StringVar(&f.id, "id", "", "the eval's `ID` (default generated): letters, digits, '-' and '_'")
	fs.StringVar(&f.dataset, "dataset", "", "dataset `FILE`: JSON Lines, one case a line")
	fs.Var(&f.sessions, "sessions", "comma-separated recorded session `LIST`: each committed run is a case")
	fs.StringVar(&f.sessionPrefix, "session-prefix", "", "recorded sessions whose IDs start with `PREFIX`: each committed run is a case")
	fs.StringVar(&f.schedule, "schedule", "", "the recorded sessions of schedule `NAME`: each committed run is a case")
	fs.StringVar(&f.baselineModel, "baseline-model", "", "run dataset cases again with model `SPEC` as the baseline")
	fs.StringVar(&f.baselineAgnt, "baseline-agent", "", "run dataset cases again as agent `NAME` as the baseline")
	fs.StringVar(&f.judgeModel, "judge-model", "", "grade each run with model `SPEC` against its case's rubric (or --rubric)")
	fs.StringVar(&f.rubric, "rubric", "", "the judge's rubric `TEXT` for cases without one")
	fs.IntVar(&f.concurrency, "concurrency", api.DefaultEvalConcurrency, fmt.Sprintf("cases that run at once (`N`, 1 to %d)", api.MaxEvalConcurrency))
	fs.Var(&f.evalBudget, "eval-budget", "most the eval's runs and judge may spend together: `AMOUNT` as for --budget")
	fs.Float64Var(&f.failUnder, "fail-under", 0, "exit 1 when the candidate's pass rate is below `F` (0 to 1)")
	fs.BoolVar(&f.asJSON, "json", false, "print the report as JSON")
}

func cmdEvalRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("eval run", "keel eval run [flags]", evalRunDesc)
	var p promptFlags
	var f evalRunFlags
	var conn connFlags
	p.register(fs)
	f.register(fs)
	conn.register(fs, false)
	if _, code, ok := fs.parse(args, stdout, stderr, 0, 0); !ok {
		return code
	}
	var given []string
	visit(fs, func(name string) { given = append(given, "--"+name) }, "session", "set-default", "attach", "approve-ask")
	if len(given) > 0 {
		return fs.usageError(stderr, "%s: not for an eval (a dataset line carries its attachments)", strings.Join(given, ", "))
	}
	if code, ok := p.validate(fs, stderr, "eval"); !ok {
		return code
	}
	if f.failUnder < 0 || f.failUnder > 1 {
		return fs.usageError(stderr, "--fail-under must be from 0 to 1, got %g", f.failUnder)
	}
	cfg := p.config()
	modelGiven := false
	visit(fs, func(string) { modelGiven = true }, "model")
	if !modelGiven && cfg.Agent == "" {
		// A recorded run's case runs on the run's own model, a dataset
		// case on the session's default, unless --model says otherwise.
		cfg.Model = ""
		if !p.tools.set {
			cfg.Tools = nil
		}
	}
	in, err := f.input(cfg)
	if err != nil {
		return fs.usageError(stderr, "%v", err)
	}
	if f.schedule == "" {
		if err := in.Validate(); err != nil {
			return fs.usageError(stderr, "%v", err)
		}
	}
	kc, err := conn.dial(ctx, stderr, api.RunConfig{})
	if err != nil {
		return fail(stderr, "eval", err)
	}
	defer kc.close()
	if f.schedule != "" {
		if err := scheduleSessions(ctx, kc, f.schedule, &in); err != nil {
			return fail(stderr, "eval", err)
		}
	}
	ev, err := kc.StartEval(ctx, in)
	if err != nil {
		return fail(stderr, "eval", err)
	}
	fmt.Fprintf(stderr, "eval %s · %d cases, %d recorded sessions · concurrency %d\n", ev.ID(), len(in.Cases), len(in.Sessions), f.concurrency)
	return finishEval(ctx, ev, f.asJSON, f.failUnder, stdout, stderr)
}

// input is the eval the flags describe, candidate cfg.
func (f *evalRunFlags) input(cfg api.RunConfig) (api.EvalInput, error) {
	in := api.EvalInput{ID: f.id, Candidate: cfg, Sessions: f.sessions.items, SessionPrefix: f.sessionPrefix,
		Concurrency: f.concurrency, Budget: f.evalBudget.b}
	if in.ID == "" {
		in.ID = "eval-" + time.Now().UTC().Format("20060102-150405")
	}
	if f.dataset != "" {
		file, err := os.Open(f.dataset)
		if err != nil {
			return in, err
		}
		defer file.Close()
		if in.Cases, err = api.ReadDataset(file); err != nil {
			return in, fmt.Errorf("%s: %w", f.dataset, err)
		}
	}
	if f.baselineModel != "" || f.baselineAgnt != "" {
		base := cfg
		base.Model, base.Agent = f.baselineModel, f.baselineAgnt
		if base.Agent != "" {
			base.Tools, base.OutputSchema = nil, nil
		}
		in.Baseline = &base
	}
	if f.judgeModel != "" {
		in.Judge = &api.EvalJudge{Model: f.judgeModel, Rubric: f.rubric}
	}
	return in, nil
}

// scheduleSessions adds the sessions of schedule name to in: its
// session, or, for a new session each firing, its sessions' prefix.
func scheduleSessions(ctx context.Context, kc *conn, name string, in *api.EvalInput) error {
	if err := api.ValidateScheduleID(name); err != nil {
		return err
	}
	s, err := kc.Schedule(name).Get(ctx)
	if err != nil {
		return err
	}
	switch target := s.Target(); {
	case target != "":
		in.Sessions = append(in.Sessions, target)
	case in.SessionPrefix != "":
		return keel.Errorf(keel.CodeInvalidInput, "--schedule %s makes a new session each firing: give it without --session-prefix", name)
	default:
		in.SessionPrefix = s.ID + "-"
	}
	return nil
}

// finishEval follows the eval to its end and prints its report; the exit
// status says whether it passed failUnder.
func finishEval(ctx context.Context, ev *client.Eval, asJSON bool, failUnder float64, stdout, stderr io.Writer) int {
	stop := showProgress(ctx, ev, stderr)
	rep, err := ev.Report(ctx)
	stop()
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(stderr, "keel eval: interrupted; eval %s goes on (keel eval report %s)\n", ev.ID(), ev.ID())
			return exitDetached
		}
		return fail(stderr, "eval", err)
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	} else {
		writeEvalReport(stdout, rep)
	}
	switch {
	case rep.Cancelled:
		return exitCancelled
	case rep.Candidate.PassRate < failUnder:
		fmt.Fprintf(stderr, "keel eval: pass rate %.1f%% is below --fail-under %.1f%%\n", 100*rep.Candidate.PassRate, 100*failUnder)
		return exitFailed
	}
	return exitOK
}

// evalTarget parses the one ID argument of status, report and cancel.
func evalTarget(name, desc string, ctx context.Context, args []string, stdout, stderr io.Writer,
	extra func(fs *flagSet), do func(*conn, string) int) int {
	fs := newFlagSet("eval "+name, "keel eval "+name+" [flags] ID", desc)
	var conn connFlags
	conn.register(fs, false)
	if extra != nil {
		extra(fs)
	}
	pos, code, ok := fs.parse(args, stdout, stderr, 1, 1)
	if !ok {
		return code
	}
	if err := keel.ValidateSessionID(pos[0]); err != nil {
		return fs.usageError(stderr, "%v", err)
	}
	kc, err := conn.dial(ctx, stderr, api.RunConfig{})
	if err != nil {
		return fail(stderr, "eval "+name, err)
	}
	defer kc.close()
	return do(kc, pos[0])
}

func cmdEvalStatus(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return evalTarget("status", "Prints an eval's progress as JSON: its state, cases done, running, passed and failed, and what it spent.",
		ctx, args, stdout, stderr, nil, func(kc *conn, id string) int {
			st, err := kc.Eval(id).Status(ctx)
			if err != nil {
				return fail(stderr, "eval status", err)
			}
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			_ = enc.Encode(st)
			return exitOK
		})
}

func cmdEvalReport(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var asJSON bool
	var failUnder float64
	return evalTarget("report", "Waits for an eval to end and prints its report, as eval run does.",
		ctx, args, stdout, stderr, func(fs *flagSet) {
			fs.BoolVar(&asJSON, "json", false, "print the report as JSON")
			fs.Float64Var(&failUnder, "fail-under", 0, "exit 1 when the candidate's pass rate is below `F` (0 to 1)")
		}, func(kc *conn, id string) int {
			return finishEval(ctx, kc.Eval(id), asJSON, failUnder, stdout, stderr)
		})
}

func cmdEvalCancel(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return evalTarget("cancel", "Cancels an eval: no case starts, its running cases' runs are cancelled, and its report holds what finished.",
		ctx, args, stdout, stderr, nil, func(kc *conn, id string) int {
			if err := kc.Eval(id).Cancel(ctx); err != nil {
				return fail(stderr, "eval cancel", err)
			}
			fmt.Fprintf(stdout, "eval %s: cancel requested\n", id)
			return exitOK
		})
}
