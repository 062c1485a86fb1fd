package main

import (
	"context"
	"fmt"
	"io"

	"github.com/keelrun/keel/api"
)

const retractDesc = `Withdraws steering that "keel steer" sent, by its STEERING_ID, from the
active run of SESSION (or run number --run). The run decides atomically and
the command prints its answer: "retracted" (exit 0: the text never enters the
conversation), "already_applied" (exit 1: it is in the conversation) or
"not_found" (exit 1: no such steering in that run).`

func cmdRetract(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("retract", "keel retract [flags] SESSION STEERING_ID", retractDesc)
	var target runTarget
	target.register(fs, "retract from")
	pos, code, ok := fs.parse(args, stdout, stderr, 2, 2)
	if !ok {
		return code
	}
	if code, ok := target.check(fs, stderr, pos[0]); !ok {
		return code
	}
	kc, run, err := target.open(ctx, stderr, pos[0])
	if err != nil {
		return fail(stderr, "retract", err)
	}
	defer kc.close()
	res, err := run.RetractSteering(ctx, pos[1])
	if err != nil {
		return fail(stderr, "retract", err)
	}
	fmt.Fprintln(stdout, res)
	if res != api.Retracted {
		return exitFailed
	}
	return exitOK
}
