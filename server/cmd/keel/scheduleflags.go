package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
)

// scheduleFlags are the flags that define a schedule: create takes them
// all, update those that are given.
type scheduleFlags struct {
	cron, timezone, prompt, session, model, agent, overlap string
	every, jitter, catchup                                 time.Duration
	newSession, pauseOnFailure                             bool
	tools, approveAsk                                      listFlag
	maxSteps                                               int
	budget, sessionBudget                                  budgetFlag
	hooks                                                  hookFlag
}

func (f *scheduleFlags) register(fs *flagSet) {
	fs.StringVar(&f.cron, "cron", "", "fire at the times of cron `EXPR` (\"0 9 * * 1-5\", 5 to 7 fields, or @hourly, @daily...)")
	fs.DurationVar(&f.every, "every", 0, "fire every `DURATION` (1h, 30m; at least 1s), counted from the epoch; with --cron, at both")
	fs.StringVar(&f.timezone, "timezone", "", "IANA time `ZONE` of --cron (Europe/Berlin; default UTC)")
	fs.DurationVar(&f.jitter, "jitter", 0, "delay each firing by a random `DURATION` up to this")
	fs.StringVar(&f.prompt, "prompt", "", "the `TEXT` each firing sends")
	fs.StringVar(&f.session, "session", "", "send every firing to session `ID` (default: the session named like the schedule)")
	fs.BoolVar(&f.newSession, "new-session", false, "give every firing a new session, named ID-YYYYMMDDTHHMMSSZ after the schedule and the firing's time")
	fs.StringVar(&f.model, "model", "", "model `SPEC` the worker offers, for the firings' runs (default: the session's)")
	fs.StringVar(&f.agent, "agent", "", "run each firing as the worker's agent `NAME` (keel.yaml agents): its model, instructions and tools; not with --model or --tools (\"\" on update: no agent)")
	fs.Var(&f.tools, "tools", "comma-separated tool `LIST` the worker offers, for the firings' runs (default: the session's; \"\" for none)")
	fs.IntVar(&f.maxSteps, "max-steps", 0, "most model turns in each firing's run (default: the session's)")
	fs.Var(&f.approveAsk, "approve-ask", "comma-separated tool `LIST` whose every call waits for the host's approval (\"*\": all tools)")
	fs.Var(&f.budget, "budget", "most each firing's run may spend: `AMOUNT` as for keel run --budget")
	fs.Var(&f.sessionBudget, "session-budget", "most the session's runs may spend together: `AMOUNT` as for --budget")
	f.hooks.register(fs, "each firing's run")
	fs.StringVar(&f.overlap, "overlap", "", "while a run is active in the session: `POLICY` skip (send nothing), queue (run next) or steer (steer the active run) (default skip)")
	fs.BoolVar(&f.pauseOnFailure, "pause-on-failure", false, "pause the schedule when a firing fails: its send is refused or its run fails (each firing then waits for its run)")
	fs.DurationVar(&f.catchup, "catchup-window", 0, "take a firing missed while the server was down if at most `DURATION` late (default 10m, at least 10s)")
}

// config is the run configuration the flags give, nil when they give
// none; base is the config it changes (update).
func (f *scheduleFlags) config(fs *flagSet, base *api.RunConfig) *api.RunConfig {
	var cfg api.RunConfig
	if base != nil {
		cfg = *base
	}
	set := false
	visit(fs, func(name string) {
		set = true
		switch name {
		case "model":
			cfg.Model = f.model
		case "agent":
			// The agent defines the model, instructions, tools and output
			// schema: a config naming it sets none of them.
			cfg.Agent = f.agent
			if f.agent != "" {
				cfg.Model, cfg.System, cfg.Tools, cfg.OutputSchema = "", "", nil, nil
			}
		case "tools":
			cfg.Tools = slices.Clone(f.tools.items)
			if cfg.Tools == nil {
				cfg.Tools = []string{}
			}
		case "max-steps":
			cfg.MaxSteps = f.maxSteps
		case "approve-ask":
			cfg.Approvals = map[string]api.Approval{}
			for _, name := range f.approveAsk.items {
				cfg.Approvals[name] = api.ApprovalAsk
			}
		case "budget":
			cfg.Budget = f.budget.b
		case "session-budget":
			cfg.SessionBudget = f.sessionBudget.b
		case "hook":
			cfg.Hooks = f.hooks.hooks()
		}
	}, "model", "agent", "tools", "max-steps", "approve-ask", "budget", "session-budget", "hook")
	if !set && base == nil {
		return nil
	}
	return &cfg
}

// visit calls fn with each of names that was given on the command line.
func visit(fs *flagSet, fn func(name string), names ...string) {
	fs.Visit(func(fl *flag.Flag) {
		if slices.Contains(names, fl.Name) {
			fn(fl.Name)
		}
	})
}

// schedule is the schedule the flags define (create).
func (f *scheduleFlags) schedule(fs *flagSet, id string) api.Schedule {
	return api.Schedule{ID: id,
		ScheduleSpec: api.ScheduleSpec{Cron: f.cron, Every: keel.Duration(f.every), Timezone: f.timezone,
			Jitter: keel.Duration(f.jitter)},
		Prompt: f.prompt, Session: f.session, NewSession: f.newSession, Config: f.config(fs, nil),
		Overlap: api.Overlap(f.overlap), PauseOnFailure: f.pauseOnFailure, CatchupWindow: keel.Duration(f.catchup)}
}

// change is the change the given flags make to cur (update).
func (f *scheduleFlags) change(fs *flagSet, cur api.Schedule) api.ScheduleChange {
	var c api.ScheduleChange
	str := func(v string) *string { return &v }
	dur := func(v time.Duration) *keel.Duration { d := keel.Duration(v); return &d }
	boolp := func(v bool) *bool { return &v }
	configFlags := false
	fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "cron":
			c.Cron = str(f.cron)
		case "every":
			c.Every = dur(f.every)
		case "timezone":
			c.Timezone = str(f.timezone)
		case "jitter":
			c.Jitter = dur(f.jitter)
		case "prompt":
			c.Prompt = str(f.prompt)
		case "session":
			c.Session = str(f.session)
		case "new-session":
			c.NewSession = boolp(f.newSession)
		case "overlap":
			o := api.Overlap(f.overlap)
			c.Overlap = &o
		case "pause-on-failure":
			c.PauseOnFailure = boolp(f.pauseOnFailure)
		case "catchup-window":
			c.CatchupWindow = dur(f.catchup)
		case "model", "agent", "tools", "max-steps", "approve-ask", "budget", "session-budget", "hook":
			configFlags = true
		}
	})
	if configFlags {
		c.Config = f.config(fs, cur.Config)
	}
	return c
}

const scheduleCreateDesc = `Creates schedule ID: at the times of --cron, every --every, or both, it
sends --prompt to --session (by default the session named ID), or with
--new-session to a new session each time, named after the schedule and the
firing's time. --model, --tools and the other run flags configure each
firing's run, for that run only; a model or tool the worker does not offer
is refused now, and checked again at every firing. --overlap says what a
firing does while a run is active in the session: skip (the default),
queue, or steer. A firing missed while the server was down is taken when
it is back if it is at most --catchup-window late (default 10m). A keel
worker must be running: it checks the schedule.`

func cmdScheduleCreate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("schedule create", "keel schedule create [flags] ID", scheduleCreateDesc)
	var t scheduleTarget
	var f scheduleFlags
	t.register(fs)
	f.register(fs)
	asJSON := fs.Bool("json", false, "print the new schedule's description as JSON")
	id, code, ok := t.parse(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if err := checkAgentFlag(fs, f.agent, "model", "tools"); err != nil {
		return fs.usageError(stderr, "%v", err)
	}
	s := f.schedule(fs, id)
	if err := s.Validate(api.Limits{}); err != nil {
		return fs.usageError(stderr, "%s", trimKeel(err))
	}
	kc, err := t.dial(ctx, stderr)
	if err != nil {
		return fail(stderr, "schedule create", err)
	}
	defer kc.close()
	if err := kc.CreateSchedule(ctx, s); err != nil {
		return fail(stderr, "schedule create", err)
	}
	return printScheduleNow(ctx, kc, id, "created", *asJSON, stdout, stderr)
}

const scheduleUpdateDesc = `Changes schedule ID: each flag given replaces what the schedule had
(--session switches it to that session, --new-session to new sessions; a
run flag such as --model changes that part of the run's configuration and
keeps the rest). The new definition is checked as create checks one.
Firings already started keep the definition they began with.`

func cmdScheduleUpdate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("schedule update", "keel schedule update [flags] ID", scheduleUpdateDesc)
	var t scheduleTarget
	var f scheduleFlags
	f.hooks.update = true // --hook "": the firings name no hooks
	t.register(fs)
	f.register(fs)
	asJSON := fs.Bool("json", false, "print the changed schedule's description as JSON")
	id, code, ok := t.parse(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	given := false
	fs.Visit(func(fl *flag.Flag) { given = given || isScheduleFlag(fl.Name) })
	if !given {
		return fs.usageError(stderr, "nothing to change: give the flags to change")
	}
	if err := checkAgentFlag(fs, f.agent, "model", "tools"); err != nil {
		return fs.usageError(stderr, "%v", err)
	}
	kc, err := t.dial(ctx, stderr)
	if err != nil {
		return fail(stderr, "schedule update", err)
	}
	defer kc.close()
	h := kc.Schedule(id)
	cur, err := h.Get(ctx)
	if err != nil {
		return fail(stderr, "schedule update", err)
	}
	if _, err := h.Update(ctx, f.change(fs, cur)); err != nil {
		return fail(stderr, "schedule update", err)
	}
	return printScheduleNow(ctx, kc, id, "updated", *asJSON, stdout, stderr)
}

// isScheduleFlag reports whether name is one of scheduleFlags'.
func isScheduleFlag(name string) bool {
	return slices.Contains([]string{"cron", "every", "timezone", "jitter", "prompt", "session", "new-session", "model",
		"agent", "tools", "max-steps", "approve-ask", "budget", "session-budget", "hook", "overlap", "pause-on-failure", "catchup-window"}, name)
}

// printScheduleNow prints the schedule after a change: its description
// as JSON, or a line with its next firing.
func printScheduleNow(ctx context.Context, kc *conn, id, what string, asJSON bool, stdout, stderr io.Writer) int {
	st, err := kc.Schedule(id).Describe(ctx)
	if err != nil {
		return fail(stderr, "schedule "+what, err)
	}
	if asJSON {
		printJSON(stdout, st)
		return exitOK
	}
	next := "none"
	if len(st.Next) > 0 {
		next = st.Next[0].UTC().Format(time.RFC3339)
	}
	fmt.Fprintf(stdout, "schedule %s %s; next firing %s\n", id, what, next)
	return exitOK
}

// clientListOptions are the list's options for --prefix.
func clientListOptions(prefix string) client.ScheduleListOptions {
	return client.ScheduleListOptions{Prefix: prefix}
}
