package main

import (
	"context"
	"fmt"
	"io"

	"github.com/keelrun/keel/api"
)

const upgradeDesc = `Moves every idle session onto the current build of the worker deployment.
A session's execution is pinned to the build it started on, and each run
ends by continuing onto the current build; a session that waits for its
next prompt stays where it is until that prompt has run, so an old build
cannot drain. keel upgrade sends every open session the "move" signal:
an idle one continues as new at once, one running a run moves when the
run ends, as it would anyway. Run it after making a new build current
(docs/operations.md).`

func cmdUpgrade(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("upgrade", "keel upgrade [flags]", upgradeDesc)
	var conn connFlags
	conn.register(fs, false)
	if _, code, ok := fs.parse(args, stdout, stderr, 0, 0); !ok {
		return code
	}
	kc, err := conn.dial(ctx, stderr, api.RunConfig{})
	if err != nil {
		return fail(stderr, "upgrade", err)
	}
	defer kc.close()
	n, err := kc.MoveIdleSessions(ctx)
	if err != nil {
		return fail(stderr, "upgrade", err)
	}
	fmt.Fprintf(stdout, "asked %d open %s to move to the current build (idle ones move now, the others after their run)\n",
		n, plural(n, "session", "sessions"))
	return exitOK
}
