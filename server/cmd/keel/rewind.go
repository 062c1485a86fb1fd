package main

import (
	"context"
	"fmt"
	"io"

	"github.com/keelrun/keel/api"
)

const rewindDesc = `Makes SESSION go on from an earlier point: after run N (--to-run; 0 is
before its first run), or after step K of run N (--to-step). The history its
model sees ("keel history") is cut there; its log stays whole ("keel events"
still shows the later runs) and records a session.rewound event saying from
where to where. Its next prompt runs on top of the point, numbered after the
session's last run. Refused while a run is active or queued (keel.RunActive).`

func cmdRewind(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("rewind", "keel rewind [flags] SESSION --to-run N", rewindDesc)
	var conn connFlags
	conn.register(fs, false)
	p := pointFlags(fs, "to-run", "to-step", "go on")
	pos, code, ok := fs.parse(args, stdout, stderr, 1, 1)
	if !ok {
		return code
	}
	if code, ok := p.check(fs, stderr, pos[0]); !ok {
		return code
	}
	kc, err := conn.dial(ctx, stderr, api.RunConfig{})
	if err != nil {
		return fail(stderr, "rewind", err)
	}
	defer kc.close()
	res, err := kc.Session(pos[0]).Rewind(ctx, p.point())
	if err != nil {
		return fail(stderr, "rewind", err)
	}
	fmt.Fprintf(stdout, "rewound %s from run %d (revision %d) to %s: revision %d, %d messages, session.rewound at seq %d\n",
		pos[0], res.FromRun, res.FromRevision, p, res.Revision, res.Messages, res.Seq)
	return exitOK
}
