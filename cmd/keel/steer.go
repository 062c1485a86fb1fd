package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/workflows"
)

const steerDesc = `Sends TEXT to the active run of SESSION (or run number --run) as steering:
more user input for a run in progress. It returns once the run has accepted
it, and prints the steering ID on stdout (for "keel retract"). The input
enters the conversation at the run's next model step, never in the middle of
a tool batch; if the model ends its turn first, the run goes on with it. A
run that is ending refuses steering (exit 1).`

func cmdSteer(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("steer", "keel steer [flags] SESSION TEXT", steerDesc)
	var conn connFlags
	conn.register(fs, false)
	runN := fs.Int("run", 0, "steer run number `N` instead of the active run")
	pos, code, ok := fs.parse(args, stdout, stderr, 2, -1)
	if !ok {
		return code
	}
	session, text := pos[0], strings.Join(pos[1:], " ")
	switch {
	case keel.ValidateSessionID(session) != nil:
		return fs.usageError(stderr, "%v", keel.ValidateSessionID(session))
	case strings.TrimSpace(text) == "":
		return fs.usageError(stderr, "the steering text is empty")
	case len(text) > workflows.MaxPromptBytes:
		return fs.usageError(stderr, "the text is %d bytes; the limit is %d", len(text), workflows.MaxPromptBytes)
	case *runN < 0:
		return fs.usageError(stderr, "--run must be a run number from 1, got %d", *runN)
	}
	kc, err := conn.dial(ctx, stderr, workflows.RunConfig{})
	if err != nil {
		return fail(stderr, "steer", err)
	}
	defer kc.close()
	run, err := targetRun(ctx, kc.Session(session), *runN)
	if err != nil {
		return fail(stderr, "steer", err)
	}
	id, err := run.SteerRetractable(ctx, text)
	if err != nil {
		return fail(stderr, "steer", err)
	}
	fmt.Fprintln(stdout, id)
	fmt.Fprintf(stderr, "steering accepted by %s; it enters the conversation at the next step\n", run.ID)
	return exitOK
}
