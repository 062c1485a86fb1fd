package main

import (
	"context"
	"fmt"
	"io"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
)

const forkDesc = `Makes a new session whose conversation is SESSION's committed transcript
after run N (--at-run; 0 is before its first run), or after step K of run N
(--at-step: the run's prompt, its first K assistant turns and their tool
results). The new session's log begins with a session.forked event naming
SESSION, the point and SESSION's revision there; its next prompt ("keel run
NEW ...") runs on top of it. SESSION is untouched. Nothing is copied: the fork
shares the transcript SESSION stored.

Without --into the new session's ID is generated. The command prints it.
Forking again into the same --into at the same point answers the fork made
before; into an ID another session holds fails. A point inside a run that is
still active is refused (keel.RunActive): fork at a committed run.`

func cmdFork(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("fork", "keel fork [flags] SESSION --at-run N", forkDesc)
	var conn connFlags
	conn.register(fs, false)
	p := pointFlags(fs, "at-run", "at-step", "fork")
	into := fs.String("into", "", "the new session's `ID` (default generated)")
	pos, code, ok := fs.parse(args, stdout, stderr, 1, 1)
	if !ok {
		return code
	}
	if code, ok := p.check(fs, stderr, pos[0]); !ok {
		return code
	}
	if *into != "" {
		if err := keel.ValidateSessionID(*into); err != nil {
			return fs.usageError(stderr, "--into: %v", err)
		}
	}
	kc, err := conn.dial(ctx, stderr, api.RunConfig{})
	if err != nil {
		return fail(stderr, "fork", err)
	}
	defer kc.close()
	fork, origin, err := kc.Session(pos[0]).Fork(ctx, p.point(), *into)
	if err != nil {
		return fail(stderr, "fork", err)
	}
	fmt.Fprintf(stdout, "%s\n", fork.ID())
	fmt.Fprintf(stderr, "forked %s at %s (revision %d, seq %d) into %s\n", origin.Source, p, origin.Revision, origin.Seq, fork.ID())
	return exitOK
}

// pointFlag holds the flags that name a point of a session: a run and,
// optionally, a step of it.
type pointFlag struct {
	run, step        *int
	runName, stepArg string
}

// pointFlags registers the run flag (required) and the step flag.
func pointFlags(fs *flagSet, runName, stepName, verb string) *pointFlag {
	return &pointFlag{
		run:     fs.Int(runName, -1, verb+" after run number `N` (0: before the first run); required"),
		step:    fs.Int(stepName, 0, verb+" after step `K` of that run instead of after the whole run"),
		runName: runName, stepArg: stepName,
	}
}

// check validates SESSION and the point.
func (p *pointFlag) check(fs *flagSet, stderr io.Writer, session string) (int, bool) {
	if err := keel.ValidateSessionID(session); err != nil {
		return fs.usageError(stderr, "%v", err), false
	}
	if *p.run < 0 {
		return fs.usageError(stderr, "--%s N is required (a run number, 0 or more)", p.runName), false
	}
	if *p.step < 0 || *p.step > 0 && *p.run == 0 {
		return fs.usageError(stderr, "--%s must be a step of run N, from 1", p.stepArg), false
	}
	return 0, true
}

func (p *pointFlag) point() api.Point { return api.Point{Run: *p.run, Step: *p.step} }

func (p *pointFlag) String() string {
	if *p.step > 0 {
		return fmt.Sprintf("step %d of run %d", *p.step, *p.run)
	}
	return fmt.Sprintf("run %d", *p.run)
}
