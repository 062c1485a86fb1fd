package main

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/server/internal/sessionlog"
	"github.com/keelrun/keel/transcript"
)

const rerunDesc = `Runs run N of SESSION again in a fork: a new session forked at the point
before run N (as "keel fork SESSION --at-run N-1" makes), sent run N's
prompt again, and rendered as "keel run" renders. SESSION is untouched.

--model and --tools change what the rerun runs with: without --model it runs
on run N's model, without --tools with the fork's defaults (SESSION's at
that point). Compare the two with "keel compare SESSION/run-N FORK".

Without --into the fork's ID is generated. Rerunning into the same --into
answers the fork made before and sends the prompt to it again.`

func cmdRerun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("rerun", "keel rerun [flags] SESSION --run N", rerunDesc)
	var conn connFlags
	conn.register(fs, true)
	runN := fs.Int("run", 0, "the `N` of the run to run again, from 1; required")
	model := fs.String("model", "", "the rerun's model `SPEC` (default: run N's)")
	var tools listFlag
	fs.Var(&tools, "tools", "comma-separated tool `LIST` of the rerun (default: the fork's defaults)")
	maxSteps := fs.Int("max-steps", 0, "model turns the rerun may take (`N`; default the worker's)")
	into := fs.String("into", "", "the fork's session `ID` (default generated)")
	pos, code, ok := fs.parse(args, stdout, stderr, 1, 1)
	if !ok {
		return code
	}
	if err := keel.ValidateSessionID(pos[0]); err != nil {
		return fs.usageError(stderr, "%v", err)
	}
	if *runN < 1 {
		return fs.usageError(stderr, "--run N is required: the number of a committed run, from 1")
	}
	if *maxSteps < 0 {
		return fs.usageError(stderr, "--max-steps must be positive, got %d", *maxSteps)
	}
	if *into != "" {
		if err := keel.ValidateSessionID(*into); err != nil {
			return fs.usageError(stderr, "--into: %v", err)
		}
	}
	kc, err := conn.dial(ctx, stderr, api.RunConfig{})
	if err != nil {
		return fail(stderr, "rerun", err)
	}
	defer kc.close()
	src := kc.Session(pos[0])
	view, _, err := readSession(ctx, src)
	if err != nil {
		return fail(stderr, "rerun", err)
	}
	var original *transcript.Run
	for _, r := range view.Runs() {
		if r.Number == *runN {
			original = r
		}
	}
	if original == nil || original.Prompt == "" {
		return fail(stderr, "rerun", keel.Errorf(keel.CodeNotFound, "session %s has no run %d in its log", src.ID(), *runN))
	}
	if !original.Status.Ended() {
		return fail(stderr, "rerun", keel.Errorf(keel.CodeRunActive, "run %d of session %s has not ended; rerun a committed run", *runN, src.ID()))
	}
	cfg := api.RunConfig{Model: original.Model, MaxSteps: *maxSteps}
	if *model != "" {
		cfg.Model = *model
	}
	if tools.set {
		cfg.Tools = slices.Clone(tools.items)
		if cfg.Tools == nil {
			cfg.Tools = []string{}
		}
	}
	fork, _, err := src.Fork(ctx, api.Point{Run: *runN - 1}, *into)
	if err != nil {
		return fail(stderr, "rerun", err)
	}
	run, err := fork.Send(ctx, original.Prompt, client.WithConfig(cfg))
	if err != nil {
		return fail(stderr, "rerun", fmt.Errorf("send to fork %s: %w", fork.ID(), err))
	}
	fmt.Fprintf(stderr, "rerun of %s/run-%d in %s · run %s · model %s\n", src.ID(), *runN, fork.ID(), run.ID, cfg.Model)
	r := newRenderer(stdout, renderOptions{color: useColor(stdout)})
	return followRun(ctx, run, r, stderr, nil)
}

// maxCompareEvents bounds the events a command reads of one session.
const maxCompareEvents = 1_000_000

// readSession reads the session's durable log from its start into a
// transcript, and the span of each run's durable events.
func readSession(ctx context.Context, s *client.Session) (*transcript.Transcript, map[string]sessionlog.Span, error) {
	t, spans, err := sessionlog.Read(ctx, s, maxCompareEvents)
	if err != nil {
		return nil, nil, fmt.Errorf("read the log of session %s: %w", s.ID(), err)
	}
	return t, spans, nil
}
