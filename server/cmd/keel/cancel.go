package main

import (
	"context"
	"fmt"
	"io"

	"github.com/keelrun/keel"
)

const cancelDesc = `Cancels the active run of SESSION, or with --run N the session's run
number N. Cancellation is cooperative and idempotent: the run stops its model
call, tools and timers, commits what it can, ends with run.cancelled, and
"keel run" following it exits with status 2. The command returns once the
request is delivered, not when the run has stopped; watch that with "keel
events SESSION --follow".`

func cmdCancel(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("cancel", "keel cancel [flags] SESSION", cancelDesc)
	var target runTarget
	target.register(fs, "cancel")
	pos, code, ok := fs.parse(args, stdout, stderr, 1, 1)
	if !ok {
		return code
	}
	session := pos[0]
	if code, ok := target.check(fs, stderr, session); !ok {
		return code
	}
	kc, err := target.dial(ctx, stderr)
	if err != nil {
		return fail(stderr, "cancel", err)
	}
	defer kc.close()
	sess := kc.Session(session)
	st, err := sess.State(ctx)
	if err != nil {
		return fail(stderr, "cancel", err)
	}
	n := target.n
	if n == 0 {
		// Find the active run and cancel that one by number: a session-wide
		// cancel could reach the next run if this one ends in between.
		if st.ActiveRun == nil {
			fmt.Fprintf(stdout, "session %s has no active run; nothing to cancel\n", session)
			return exitOK
		}
		n = st.ActiveRun.Number
	}
	run := sess.Run(n)
	if n > st.Runs {
		// Not started (queued behind the active run) or never sent. A
		// session takes a cancel naming its run and drops it unless
		// that run is the active one (api.CancelRequest), so the signal
		// would vanish without a word: say so here.
		if n <= st.Runs+st.Queued {
			return fail(stderr, "cancel", &keel.Error{Code: keel.CodeNotAccepting,
				Message: fmt.Sprintf("%s is queued and has not started; nothing to cancel", run.ID)})
		}
		return fail(stderr, "cancel", &keel.Error{Code: keel.CodeNotFound, Message: "run " + run.ID + " not found"})
	}
	// Cancelling a run that ended is a no-op: say so rather than claim a
	// cancellation is on its way. (Checked before cancelling, since after
	// it the run may have ended because of it.)
	if st, err := run.State(ctx); err == nil && st.Outcome != nil && st.Outcome.Status != keel.StatusActive {
		fmt.Fprintf(stdout, "%s already ended (%s); nothing to cancel\n", run.ID, st.Outcome.Status)
		return exitOK
	}
	if err := run.Cancel(ctx); err != nil {
		return fail(stderr, "cancel", err)
	}
	fmt.Fprintf(stdout, "cancellation of %s requested\n", run.ID)
	return exitOK
}
