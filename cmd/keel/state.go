package main

import (
	"context"
	"encoding/json"
	"io"
)

const stateDesc = `Prints the state of SESSION as indented JSON: its state (idle, running,
waiting_for_host_input, cancelling, completed, failed), revision, last event
sequence, number of runs, the active run, usage totals and the last outcome.
With --run N it prints the state of the session's run number N instead. The
same answers come from "temporal workflow query --workflow-id SESSION --type
state".`

func cmdState(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("state", "keel state [flags] SESSION", stateDesc)
	var target runTarget
	target.conn.register(fs, false)
	fs.IntVar(&target.n, "run", 0, "show run number `N` of the session instead")
	pos, code, ok := fs.parse(args, stdout, stderr, 1, 1)
	if !ok {
		return code
	}
	if code, ok := target.check(fs, stderr, pos[0]); !ok {
		return code
	}
	kc, err := target.dial(ctx, stderr)
	if err != nil {
		return fail(stderr, "state", err)
	}
	defer kc.close()
	sess := kc.Session(pos[0])
	var v any
	if target.n > 0 {
		v, err = sess.Run(target.n).State(ctx)
	} else {
		v, err = sess.State(ctx)
	}
	if err != nil {
		return fail(stderr, "state", err)
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return exitOK
}
