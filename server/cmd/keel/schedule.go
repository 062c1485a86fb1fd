package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
)

// keel schedule: recurring prompts as Temporal Schedules
// (docs/contract.md §22, docs/cli.md "keel schedule").

const scheduleDesc = `Manages schedules: prompts sent on a schedule through the same send path
as any prompt, so a scheduled run gets its events, host input, budgets and
cancel like any other. Each schedule is a Temporal Schedule of the same ID,
visible and controllable in the Temporal Web UI and with "temporal
schedule" too.`

var scheduleCommands = []command{
	{"create", "create a schedule", cmdScheduleCreate},
	{"list", "list the schedules", cmdScheduleList},
	{"describe", "show a schedule: when it fires next, its latest firings and their runs", cmdScheduleDescribe},
	{"pause", "stop a schedule's firings until unpause", cmdSchedulePause},
	{"unpause", "make a paused schedule fire again", cmdScheduleUnpause},
	{"trigger", "fire a schedule now", cmdScheduleTrigger},
	{"update", "change a schedule: only the flags given change", cmdScheduleUpdate},
	{"delete", "delete a schedule (the sessions it made stay)", cmdScheduleDelete},
}

func cmdSchedule(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runGroup(ctx, "schedule", "COMMAND [flags] [ID]", scheduleDesc, scheduleCommands, args, stdout, stderr)
}

// scheduleTarget is the flags of the commands that act on one schedule.
type scheduleTarget struct {
	conn connFlags
}

func (t *scheduleTarget) register(fs *flagSet) { t.conn.register(fs, false) }

// parse parses args for one schedule's ID and checks it.
func (t *scheduleTarget) parse(fs *flagSet, args []string, stdout, stderr io.Writer) (string, int, bool) {
	pos, code, ok := fs.parse(args, stdout, stderr, 1, 1)
	if !ok {
		return "", code, false
	}
	if err := api.ValidateScheduleID(pos[0]); err != nil {
		return "", fs.usageError(stderr, "%v", trimKeel(err)), false
	}
	return pos[0], exitOK, true
}

func (t *scheduleTarget) dial(ctx context.Context, stderr io.Writer) (*conn, error) {
	return t.conn.dial(ctx, stderr, api.RunConfig{})
}

// trimKeel is an error's message without keel's prefix.
func trimKeel(err error) string {
	if ke, ok := err.(*keel.Error); ok {
		return ke.Message
	}
	return err.Error()
}

// printJSON writes v as one line of JSON.
func printJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

const scheduleListDesc = `Lists the schedules of the namespace (keel's: Temporal Schedules whose
action is keel's ScheduledSend), sorted by ID, with whether each is paused
and when it fires next. Temporal's visibility lists them, so a schedule
made a moment ago may be missing for a moment.`

func cmdScheduleList(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("schedule list", "keel schedule list [flags]", scheduleListDesc)
	var t scheduleTarget
	t.register(fs)
	asJSON := fs.Bool("json", false, "print the list as JSON: {\"schedules\": [...], \"truncated\": bool}")
	prefix := fs.String("prefix", "", "list only the schedules whose IDs start with `PREFIX`")
	if _, code, ok := fs.parse(args, stdout, stderr, 0, 0); !ok {
		return code
	}
	kc, err := t.dial(ctx, stderr)
	if err != nil {
		return fail(stderr, "schedule list", err)
	}
	defer kc.close()
	list, truncated, err := kc.Schedules(ctx, clientListOptions(*prefix))
	if err != nil {
		return fail(stderr, "schedule list", err)
	}
	if *asJSON {
		printJSON(stdout, struct {
			Schedules []api.ScheduleSummary `json:"schedules"`
			Truncated bool                  `json:"truncated"`
		}{list, truncated})
		return exitOK
	}
	if len(list) == 0 {
		fmt.Fprintln(stdout, "no schedules")
		return exitOK
	}
	fmt.Fprintf(stdout, "%-32s %-8s %-21s %s\n", "ID", "STATE", "NEXT", "LAST")
	for _, s := range list {
		state := "active"
		if s.Paused {
			state = "paused"
		}
		fmt.Fprintf(stdout, "%-32s %-8s %-21s %s\n", s.ID, state, timeOrDash(s.Next), timeOrDash(s.Last))
	}
	if truncated {
		fmt.Fprintf(stdout, "(more than %d schedules; the rest are not listed)\n", len(list))
	}
	return exitOK
}

const scheduleDescribeDesc = `Shows schedule ID: when it fires (and next, up to ten times), what it
sends where, whether it is paused and why (a failed firing of a
--pause-on-failure schedule pauses it and says which run failed), and its
latest firings with the session and run each made and how that run went.`

func cmdScheduleDescribe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("schedule describe", "keel schedule describe [flags] ID", scheduleDescribeDesc)
	var t scheduleTarget
	t.register(fs)
	asJSON := fs.Bool("json", false, "print the description as JSON")
	id, code, ok := t.parse(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	kc, err := t.dial(ctx, stderr)
	if err != nil {
		return fail(stderr, "schedule describe", err)
	}
	defer kc.close()
	st, err := kc.Schedule(id).Describe(ctx)
	if err != nil {
		return fail(stderr, "schedule describe", err)
	}
	if *asJSON {
		printJSON(stdout, st)
	} else {
		printScheduleStatus(stdout, st)
	}
	return exitOK
}

// scheduleNoteCommand is pause and unpause: an action on one schedule
// that takes a --note.
func scheduleNoteCommand(ctx context.Context, name, desc string, args []string, stdout, stderr io.Writer,
	act func(ctx context.Context, kc *conn, id, note string) error) int {
	return actOnSchedule(ctx, name, name+"d", desc, true, args, stdout, stderr, act)
}

// scheduleActCommand is trigger and delete: an action on one schedule.
func scheduleActCommand(ctx context.Context, name, past, desc string, args []string, stdout, stderr io.Writer,
	act func(ctx context.Context, kc *conn, id string) error) int {
	return actOnSchedule(ctx, name, past, desc, false, args, stdout, stderr,
		func(ctx context.Context, kc *conn, id, _ string) error { return act(ctx, kc, id) })
}

// actOnSchedule parses the schedule's ID (and --note, if withNote),
// applies act and says it was done (past).
func actOnSchedule(ctx context.Context, name, past, desc string, withNote bool, args []string, stdout, stderr io.Writer,
	act func(ctx context.Context, kc *conn, id, note string) error) int {
	fs := newFlagSet("schedule "+name, "keel schedule "+name+" [flags] ID", desc)
	var t scheduleTarget
	t.register(fs)
	var note string
	if withNote {
		fs.StringVar(&note, "note", "", "why, shown by describe and in the Temporal Web UI (at most 1024 bytes)")
	}
	id, code, ok := t.parse(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	kc, err := t.dial(ctx, stderr)
	if err != nil {
		return fail(stderr, "schedule "+name, err)
	}
	defer kc.close()
	if err := act(ctx, kc, id, note); err != nil {
		return fail(stderr, "schedule "+name, err)
	}
	fmt.Fprintf(stdout, "schedule %s %s\n", id, past)
	return exitOK
}

func cmdSchedulePause(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return scheduleNoteCommand(ctx, "pause", `Pauses schedule ID: it does not fire until "keel schedule unpause"
("keel schedule trigger" still fires it). Runs already started go on.`, args, stdout, stderr,
		func(ctx context.Context, kc *conn, id, note string) error { return kc.Schedule(id).Pause(ctx, note) })
}

func cmdScheduleUnpause(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return scheduleNoteCommand(ctx, "unpause", `Makes paused schedule ID fire again, whether it was paused by hand or
by a failed firing (--pause-on-failure). Firings missed while paused are
not made up.`, args, stdout, stderr,
		func(ctx context.Context, kc *conn, id, note string) error { return kc.Schedule(id).Unpause(ctx, note) })
}

func cmdScheduleTrigger(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return scheduleActCommand(ctx, "trigger", "triggered", `Fires schedule ID now, paused or not, as a firing at this time: it follows
the schedule's --overlap like any other. It returns once Temporal took the
request; "keel schedule describe ID" shows the firing and its run.`, args, stdout, stderr,
		func(ctx context.Context, kc *conn, id string) error { return kc.Schedule(id).Trigger(ctx) })
}

func cmdScheduleDelete(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return scheduleActCommand(ctx, "delete", "deleted", `Deletes schedule ID. The sessions its firings made, their runs and
events stay, readable with "keel events", "keel state" and "keel history";
a firing still running goes on.`, args, stdout, stderr,
		func(ctx context.Context, kc *conn, id string) error { return kc.Schedule(id).Delete(ctx) })
}
