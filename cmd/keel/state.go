package main

import (
	"context"
	"encoding/json"
	"io"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/workflows"
)

const stateDesc = `Prints the state of SESSION as indented JSON: its state (idle, running,
waiting_for_host_input, cancelling, completed, failed), revision, last event
sequence, number of runs, the active run, usage totals and the last outcome.
With --run N it prints the state of the session's run number N instead. The
same answers come from "temporal workflow query --workflow-id SESSION --type
state".`

func cmdState(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("state", "keel state [flags] SESSION", stateDesc)
	var conn connFlags
	conn.register(fs, false)
	runN := fs.Int("run", 0, "show run number `N` of the session instead")
	pos, code, ok := fs.parse(args, stdout, stderr, 1, 1)
	if !ok {
		return code
	}
	if err := keel.ValidateSessionID(pos[0]); err != nil {
		return fs.usageError(stderr, "%v", err)
	}
	if *runN < 0 {
		return fs.usageError(stderr, "--run must be a run number from 1, got %d", *runN)
	}
	kc, err := conn.dial(ctx, stderr, workflows.RunConfig{})
	if err != nil {
		return fail(stderr, "state", err)
	}
	defer kc.close()
	sess := kc.Session(pos[0])
	var v any
	if *runN > 0 {
		v, err = sess.Run(*runN).State(ctx)
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
