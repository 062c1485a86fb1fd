package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/keelrun/keel/api"
)

// --hook NAME names a hook as RunConfig.Validate takes one: a name that
// cannot be one, a name given twice and more than api.MaxRunHooks are
// usage errors before anything is dialled; on schedule update "" names
// none.
func TestHookFlag(t *testing.T) {
	ctx := context.Background()
	nine := []string{"run"}
	for i := range api.MaxRunHooks + 1 {
		nine = append(nine, "--hook", fmt.Sprintf("h%d", i))
	}
	for name, args := range map[string][]string{
		"a path":            {"run", "--hook", "../hook", "hi"},
		"empty":             {"send", "--hook", "", "hi"},
		"twice":             {"run", "--hook", "guard", "--hook", "guard", "hi"},
		"too many":          append(nine, "hi"),
		"schedule, a space": {"schedule", "create", "s1", "--every", "1h", "--prompt", "x", "--hook", "a b"},
		"schedule, empty":   {"schedule", "create", "s1", "--every", "1h", "--prompt", "x", "--hook", ""},
	} {
		code, _, errOut := keelCmd(ctx, args...)
		if code != exitUsage || !strings.Contains(errOut, "-hook") {
			t.Errorf("%s: keel %s: status %d, want %d\n%s", name, strings.Join(args, " "), code, exitUsage, errOut)
		}
	}

	parse := func(update bool, args ...string) (*flagSet, *scheduleFlags) {
		t.Helper()
		fs := newFlagSet("schedule test", "", "")
		var f scheduleFlags
		f.hooks.update = update
		f.register(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return fs, &f
	}
	fs, f := parse(false, "--hook", "guard", "--hook", "audit")
	if s := f.schedule(fs, "s1"); s.Config == nil || !slices.Equal(s.Config.Hooks, []string{"guard", "audit"}) {
		t.Fatalf("create config: %+v", s.Config)
	}
	cur := api.Schedule{ID: "s1", Config: &api.RunConfig{Model: "scripted:a", Hooks: []string{"guard"}}}
	fs, f = parse(true, "--hook", "audit")
	if c := f.change(fs, cur); c.Config == nil || !slices.Equal(c.Config.Hooks, []string{"audit"}) || c.Config.Model != "scripted:a" {
		t.Fatalf("update config: %+v", c.Config)
	}
	fs, f = parse(true, "--hook", "")
	if c := f.change(fs, cur); c.Config == nil || c.Config.Hooks != nil || c.Config.Model != "scripted:a" {
		t.Fatalf("update to no hooks: %+v", c.Config)
	}
	if !isScheduleFlag("hook") {
		t.Error("--hook alone is no change to schedule update")
	}
	if got := configText(&api.RunConfig{Model: "scripted:a", Hooks: []string{"guard", "audit"}}); got != "model scripted:a, hooks guard,audit" {
		t.Errorf("describe shows the config as %q", got)
	}
}
