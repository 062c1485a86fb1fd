package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/keelrun/keel/api"
)

const steerDesc = `Sends TEXT to the active run of SESSION (or run number --run) as steering:
more user input for a run in progress. It returns once the run has accepted
it, and prints the steering ID on stdout (for "keel retract"). The input
enters the conversation at the run's next model step, never in the middle of
a tool batch; if the model ends its turn first, the run goes on with it. A
run that is ending refuses steering (exit 1). --attach adds images and PDFs
to it, as in "keel run".`

func cmdSteer(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("steer", "keel steer [flags] SESSION TEXT", steerDesc)
	var target runTarget
	target.register(fs, "steer")
	var att attachFlag
	att.register(fs)
	pos, code, ok := fs.parse(args, stdout, stderr, 2, -1)
	if !ok {
		return code
	}
	session, text := pos[0], strings.Join(pos[1:], " ")
	if code, ok := target.check(fs, stderr, session); !ok {
		return code
	}
	switch {
	case strings.TrimSpace(text) == "":
		return fs.usageError(stderr, "the steering text is empty")
	case len(text) > api.MaxPromptBytes:
		return fs.usageError(stderr, "the text is %d bytes; the limit is %d", len(text), api.MaxPromptBytes)
	}
	files, code, ok := att.load(fs, stderr)
	if !ok {
		return code
	}
	kc, run, err := target.open(ctx, stderr, session)
	if err != nil {
		return fail(stderr, "steer", err)
	}
	defer kc.close()
	atts, err := attach(ctx, kc, files)
	if err != nil {
		return fail(stderr, "steer", err)
	}
	id, err := run.SteerAttached(ctx, text, atts...)
	if err != nil {
		return fail(stderr, "steer", err)
	}
	fmt.Fprintln(stdout, id)
	fmt.Fprintf(stderr, "steering accepted by %s; it enters the conversation at the next step\n", run.ID)
	return exitOK
}
