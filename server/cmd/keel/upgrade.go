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
cannot drain. keel upgrade asks each idle session to continue as new at
once (the "move" signal); sessions running a run move when it ends.
Run it after making a new build current (docs/operations.md).`

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
	fmt.Fprintf(stdout, "asked %d idle %s to move to the current build\n", n, plural(n, "session", "sessions"))
	return exitOK
}
