package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	keelpkg "github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
)

// keel schedule's usage: every subcommand has --help; a bad definition is
// a usage error (64) before anything is dialled.
func TestScheduleCommandUsage(t *testing.T) {
	ctx := context.Background()
	for _, sub := range []string{"create", "list", "describe", "pause", "unpause", "trigger", "update", "delete"} {
		var out, errOut bytes.Buffer
		if code := dispatch(ctx, []string{"schedule", sub, "--help"}, &out, &errOut); code != exitOK ||
			!strings.Contains(out.String(), "Usage: keel schedule "+sub) {
			t.Errorf("schedule %s --help: %d\n%s%s", sub, code, out.String(), errOut.String())
		}
	}
	var out bytes.Buffer
	if code := dispatch(ctx, []string{"schedule", "--help"}, &out, &out); code != exitOK || !strings.Contains(out.String(), "trigger") {
		t.Errorf("schedule --help: %d\n%s", code, out.String())
	}
	for name, args := range map[string][]string{
		"no command":             {"schedule"},
		"an unknown command":     {"schedule", "explode"},
		"no ID":                  {"schedule", "create", "--every", "1h", "--prompt", "x"},
		"a path as ID":           {"schedule", "create", "../x", "--every", "1h", "--prompt", "x"},
		"no time":                {"schedule", "create", "s1", "--prompt", "x"},
		"no prompt":              {"schedule", "create", "s1", "--every", "1h"},
		"every millisecond":      {"schedule", "create", "s1", "--every", "1ms", "--prompt", "x"},
		"both session kinds":     {"schedule", "create", "s1", "--every", "1h", "--prompt", "x", "--session", "a", "--new-session"},
		"overlap on new":         {"schedule", "create", "s1", "--every", "1h", "--prompt", "x", "--new-session", "--overlap", "queue"},
		"a bad overlap":          {"schedule", "create", "s1", "--every", "1h", "--prompt", "x", "--overlap", "drop"},
		"a path as tool":         {"schedule", "create", "s1", "--every", "1h", "--prompt", "x", "--tools", "../bin/sh"},
		"an agent and a model":   {"schedule", "create", "s1", "--every", "1h", "--prompt", "x", "--agent", "a", "--model", "scripted:x"},
		"an agent and tools":     {"schedule", "create", "s1", "--every", "1h", "--prompt", "x", "--agent", "a", "--tools", ""},
		"a path as agent":        {"schedule", "create", "s1", "--every", "1h", "--prompt", "x", "--agent", "../a"},
		"update agent and tools": {"schedule", "update", "s1", "--agent", "a", "--tools", "read_file"},
		"update with no change":  {"schedule", "update", "s1"},
		"describe two IDs":       {"schedule", "describe", "a", "b"},
	} {
		var out, errOut bytes.Buffer
		if code := dispatch(ctx, args, &out, &errOut); code != exitUsage {
			t.Errorf("%s: exit %d, want %d\n%s%s", name, code, exitUsage, out.String(), errOut.String())
		}
	}
}

// TestScheduleAcrossDevRestart: `keel schedule create` against a `keel
// dev` process makes a schedule that fires every five seconds, each firing
// running its prompt in the schedule's session; the whole keel dev is
// killed with SIGKILL between firings, kept down until a firing it missed
// is 12 s late, and started again on its data directory, and the schedule
// fires on by itself, having taken the firings the outage missed (its
// catch-up window is the default 10 minutes), while a schedule with a
// 10-second window dropped those older than that (docs/contract.md §22.4). describe shows the
// firings with their sessions and runs, pause stops it (no next firing),
// delete removes it and the session stays readable.
func TestScheduleAcrossDevRestart(t *testing.T) {
	rig := newDevKillRig(t, 4*time.Minute)
	ctx := rig.ctx
	m := writeScript(t, `{"repeat":true,"turns":[{"text":["tock"]}]}`)
	// Firings five seconds apart, under the default least interval of a
	// minute (docs/contract.md §22.11).
	conf := filepath.Join(t.TempDir(), "keel.yaml")
	if err := os.WriteFile(conf, []byte("limits:\n  schedule_min_interval: 5s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rig.flags = []string{"--config", conf}
	p := rig.start()
	keel := func(args ...string) (string, string, int) {
		var out, errOut bytes.Buffer
		code := dispatch(ctx, append(args, "--address", p.address), &out, &errOut)
		return out.String(), errOut.String(), code
	}
	c := rig.dial(p)
	// The session exists before the first firing, so its events can be
	// followed from the start.
	run, err := c.Session("cli-tick").Send(ctx, "hello", client.WithConfig(api.RunConfig{Model: m}))
	if err != nil {
		t.Fatal(err)
	}
	o, err := run.Outcome(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, code := keel("schedule", "create", "cli-sched", "--every", "5s", "--prompt", "tick", "--session", "cli-tick",
		"--model", m, "--tools", "")
	if code != exitOK || !strings.Contains(out, "schedule cli-sched created; next firing") {
		t.Fatalf("create: %d\n%s%s", code, out, errOut)
	}
	// nextTick follows the session from seq to the next run a firing
	// started, and returns the seq of that run's end.
	// A server just started may time a call out while it loads: a
	// follower resumes from the last event it saw (docs/contract.md §14.3).
	nextTick := func(c *client.Client, seq int64) int64 {
		t.Helper()
		started := false
		for ctx.Err() == nil {
			for ev, err := range c.Session("cli-tick").EventsFrom(ctx, seq) {
				var ke *keelpkg.Error
				if errors.As(err, &ke) {
					t.Fatal(err)
				}
				if err != nil {
					t.Logf("following cli-tick after seq %d: %v; resuming", seq, err)
					break
				}
				seq = ev.Seq
				if ev.Type == keelpkg.TypeRunStarted {
					e, _ := ev.Event()
					if p := e.(keelpkg.RunStarted).Prompt; p != "tick" {
						t.Fatalf("a run of prompt %q", p)
					}
					started = true
				}
				if started && ev.Terminal() {
					return ev.Seq
				}
			}
		}
		t.Fatal(ctx.Err())
		return 0
	}
	// A second schedule keeps only firings at most 10 s late.
	if out, errOut, code = keel("schedule", "create", "cli-catchup", "--every", "5s", "--prompt", "tick", "--session", "cli-catchup",
		"--model", m, "--tools", "", "--catchup-window", "10s"); code != exitOK {
		t.Fatalf("create: %d\n%s%s", code, out, errOut)
	}
	seq := nextTick(c, o.Seq)
	c.Close()

	p.kill()
	killed := time.Now()
	t.Log("killed keel dev between firings")
	// The outage lasts until the first firing it misses is more than
	// the second schedule's catch-up window late: firings fall on
	// multiples of 5 s from the epoch, so the first missed one is the
	// next multiple after the kill. The point is time passing with no
	// server, not an event.
	firstMissed := killed.Truncate(5 * time.Second).Add(5 * time.Second)
	time.Sleep(time.Until(firstMissed.Add(10*time.Second + 2*time.Second)))
	p = rig.start()
	outage := time.Since(killed).Round(time.Second)
	c = rig.dial(p)
	defer c.Close()
	seq = nextTick(c, seq)
	nextTick(c, seq)

	out, errOut, code = keel("schedule", "describe", "cli-sched", "--json")
	if code != exitOK {
		t.Fatalf("describe: %d %s", code, errOut)
	}
	var st api.ScheduleStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("describe --json: %v\n%s", err, out)
	}
	sent := 0
	for _, f := range st.Recent {
		if f.Status == api.FiringSent && f.Result != nil && f.Result.Session == "cli-tick" {
			sent++
		}
	}
	if st.Fired < 3 || sent < 2 || st.Schedule.Prompt != "tick" || st.Schedule.Every != keelpkg.Duration(5*time.Second) {
		t.Fatalf("description: fired %d, %d sent to cli-tick, %+v", st.Fired, sent, st.Schedule)
	}
	// The default catch-up window (10 minutes) took every firing the
	// outage missed; the 10-second one dropped those older than it.
	if st.Missed != 0 {
		t.Errorf("cli-sched dropped %d firings missed in a %s outage", st.Missed, outage)
	}
	if _, errOut, code = keel("schedule", "pause", "cli-catchup"); code != exitOK {
		t.Fatalf("pause: %d %s", code, errOut)
	}
	out, _, _ = keel("schedule", "describe", "cli-catchup", "--json")
	var short api.ScheduleStatus
	if err := json.Unmarshal([]byte(out), &short); err != nil || short.Missed == 0 {
		t.Errorf("cli-catchup missed %d firings (%v): the window kept firings older than it\n%s", short.Missed, err, out)
	}
	if out, _, code = keel("schedule", "describe", "cli-sched"); code != exitOK || !strings.Contains(out, "every 5s") ||
		!strings.Contains(out, "cli-tick/run-") {
		t.Fatalf("describe: %d\n%s", code, out)
	}

	if _, errOut, code = keel("schedule", "pause", "cli-sched", "--note", "done ticking"); code != exitOK {
		t.Fatalf("pause: %d %s", code, errOut)
	}
	out, _, _ = keel("schedule", "describe", "cli-sched", "--json")
	st = api.ScheduleStatus{}
	if err := json.Unmarshal([]byte(out), &st); err != nil || !st.Paused || st.Note != "done ticking" || len(st.Next) != 0 {
		t.Fatalf("paused: %v %+v", err, st)
	}
	if _, errOut, code = keel("schedule", "update", "cli-sched", "--prompt", "tock", "--every", "1h"); code != exitOK {
		t.Fatalf("update: %d %s", code, errOut)
	}
	if out, _, _ = keel("schedule", "list", "--json"); !strings.Contains(out, `"id":"cli-sched","paused":true`) {
		t.Logf("list (visibility may lag): %s", out)
	}
	for _, id := range []string{"cli-sched", "cli-catchup"} {
		if _, errOut, code = keel("schedule", "delete", id); code != exitOK {
			t.Fatalf("delete %s: %d %s", id, code, errOut)
		}
	}
	if _, errOut, code = keel("schedule", "describe", "cli-sched"); code != exitFailed || !strings.Contains(errOut, "not found") {
		t.Fatalf("describe after delete: %d %s", code, errOut)
	}
	state, err := c.Session("cli-tick").State(ctx)
	if err != nil || state.Runs < 4 {
		t.Fatalf("the session after delete: %+v %v", state, err)
	}
}

// TestScheduleAgentFlag: --agent names the agent each firing runs as;
// on update it replaces the model, instructions, tools and output schema
// the schedule's config had (the agent defines them), and keeps the rest.
func TestScheduleAgentFlag(t *testing.T) {
	parse := func(args ...string) (*flagSet, *scheduleFlags) {
		t.Helper()
		fs := newFlagSet("schedule test", "", "")
		var f scheduleFlags
		f.register(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		if err := checkAgentFlag(fs, f.agent, "model", "tools"); err != nil {
			t.Fatal(err)
		}
		return fs, &f
	}
	fs, f := parse("--agent", "reporter", "--max-steps", "3")
	if s := f.schedule(fs, "s1"); s.Config == nil || s.Config.Agent != "reporter" || s.Config.MaxSteps != 3 || s.Config.Model != "" {
		t.Fatalf("create config: %+v", s.Config)
	}
	cur := api.Schedule{ID: "s1", Config: &api.RunConfig{Model: "scripted:a", System: "be brief", Tools: []string{"read_file"}, MaxSteps: 5}}
	fs, f = parse("--agent", "reporter")
	c := f.change(fs, cur)
	if c.Config == nil || c.Config.Agent != "reporter" || c.Config.Model != "" || c.Config.System != "" || c.Config.Tools != nil ||
		c.Config.MaxSteps != 5 {
		t.Fatalf("update config: %+v", c.Config)
	}
	fs, f = parse("--agent", "", "--model", "scripted:b")
	if c := f.change(fs, api.Schedule{ID: "s1", Config: &api.RunConfig{Agent: "reporter"}}); c.Config == nil ||
		c.Config.Agent != "" || c.Config.Model != "scripted:b" {
		t.Fatalf("update away from the agent: %+v", c.Config)
	}
}

// describe shows a firing a limit refused, with why, and no session or
// run: it made none (docs/contract.md §22.11).
func TestScheduleDescribeShowsRefusedFirings(t *testing.T) {
	refused := &keelpkg.Error{Code: keelpkg.CodeTooMany, Message: "the schedule made its 12 new sessions of the hour; the limit is 12 an hour"}
	at := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	var out bytes.Buffer
	printScheduleStatus(&out, api.ScheduleStatus{
		Schedule: api.Schedule{ID: "m", ScheduleSpec: api.ScheduleSpec{Every: keelpkg.Duration(time.Hour)}, Prompt: "x", NewSession: true},
		Recent: []api.ScheduleFiring{{ScheduledAt: at, Status: api.FiringRefused, Error: refused,
			Result: &api.ScheduledSendResult{Session: "m-20261206T090000Z", Refused: refused}}},
	})
	want := "    2026-12-06T09:00:00Z  refused  keel.TooMany: the schedule made its 12 new sessions of the hour; the limit is 12 an hour\n"
	if !strings.Contains(out.String(), want) {
		t.Fatalf("describe:\n%s\nwant the line\n%s", out.String(), want)
	}
}
