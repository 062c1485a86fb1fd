package main

import (
	"context"
	"encoding/json"
	"io"

	"github.com/keelrun/keel/api"
)

const stateDesc = `Prints the state of SESSION as indented JSON: its state (idle, running,
waiting_for_host_input, cancelling, completed, failed), revision, last event
sequence, number of runs, the active run, usage totals, the last outcome, a
fork's parent, and the sessions forked from it ("forks", as Temporal's
visibility lists them). With --run N it prints the state of the session's
run number N instead. The same answers, but forks, come from "temporal
workflow query --workflow-id SESSION --type state".`

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
		var st api.SessionStatus
		if st, err = sess.State(ctx); err == nil {
			var forks []string
			forks, err = sess.Forks(ctx)
			v = sessionState{SessionStatus: st, Forks: forks}
		}
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

// sessionState is what keel state prints of a session: its state, and the
// sessions forked from it (docs/contract.md §19).
type sessionState struct {
	api.SessionStatus
	Forks []string `json:"forks,omitempty"`
}
