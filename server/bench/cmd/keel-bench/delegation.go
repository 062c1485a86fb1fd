package main

import (
	"context"
	"fmt"
	"io"

	"github.com/keelrun/keel/server/bench"
)

const delegationDesc = `Measures what delegating to a child session costs (docs/contract.md §21) on
an in-memory Temporal server tuned as "keel dev" runs it, with an embedded
NATS server and a keel worker in this process. The same three model turns
run --runs times in one session (two turns calling a tool the run lacks,
which the workflow answers itself, then the answer) and --runs times
across a parent and its child (the parent's turn that delegates, the
child's one turn, the parent's answer). It prints both shapes' run times
(send to outcome, p50/p99, and their ratio) and billable actions per run
(the server's own action counter, by type), then how late a child's
deltas (--deltas a run, 5 ms apart) reach a subscriber of the parent,
relayed, against a subscriber of the child itself, both across NATS.
Progress goes to stderr.`

func cmdDelegation(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("delegation", "keel-bench delegation [flags]", delegationDesc)
	runs := fs.Int("runs", 50, "`N` runs of each shape")
	deltas := fs.Int("deltas", 100, "`N` deltas the streaming child sends in each run of the latency measurement")
	if code, ok := fs.parse(args, stdout, stderr); !ok {
		return code
	}
	if *runs < 1 || *deltas < 1 {
		return fs.usageError(stderr, "--runs and --deltas must be at least 1")
	}
	rep, err := bench.MeasureDelegation(ctx, bench.DelegationOptions{Runs: *runs, Deltas: *deltas,
		Progress: func(s string) { fmt.Fprintf(stderr, "keel-bench delegation: %s\n", s) }})
	if err != nil {
		fmt.Fprintf(stderr, "keel-bench delegation: %v\n", err)
		return exitFailed
	}
	rep.Print(stdout)
	return exitOK
}
