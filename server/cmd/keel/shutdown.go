package main

import (
	"context"
	"fmt"
	"io"

	"github.com/keelrun/keel/api"
)

const shutdownDesc = `Shuts keel down for the whole namespace: the first call cancels every
active run and makes new sessions and runs fail with keel.RuntimeShutdown;
it prints how many runs it cancelled. Later calls change nothing and say so.
This is not how to stop "keel dev" or a worker (use Ctrl-C or SIGTERM for
those), and it has no undo, so it asks for --yes.`

func cmdShutdown(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("shutdown", "keel shutdown --yes [flags]", shutdownDesc)
	var conn connFlags
	conn.register(fs, false)
	yes := fs.Bool("yes", false, "confirm: cancel every active run and refuse new ones")
	if _, code, ok := fs.parse(args, stdout, stderr, 0, 0); !ok {
		return code
	}
	if !*yes {
		// The namespace named is the one the environment or profile picks
		// too; a configuration error shows when dialing.
		_, _ = conn.resolve()
		return fs.usageError(stderr, "this cancels every active run in namespace %q and refuses new ones; confirm with --yes", conn.namespace)
	}
	kc, err := conn.dial(ctx, stderr, api.RunConfig{})
	if err != nil {
		return fail(stderr, "shutdown", err)
	}
	defer kc.close()
	res, err := kc.Shutdown(ctx)
	if err != nil {
		return fail(stderr, "shutdown", err)
	}
	if res.AlreadyShutDown {
		fmt.Fprintf(stdout, "keel was already shut down (since %s); nothing changed\n", res.At.Format("2006-01-02 15:04:05 MST"))
		return exitOK
	}
	fmt.Fprintf(stdout, "keel is shut down: %d active %s cancelled; new runs are refused\n", res.Cancelled, plural(res.Cancelled, "run", "runs"))
	return exitOK
}
