package api_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
)

// A firing of a new-session schedule names its session after the
// schedule and the firing's time in UTC, within the session-ID rules
// even for the longest schedule ID (docs/contract.md §22.3).
func TestScheduledSessionID(t *testing.T) {
	at := time.Date(2026, 3, 9, 9, 0, 5, 123, time.FixedZone("CET", 3600))
	if got := api.ScheduledSessionID("morning", at); got != "morning-20260309T080005Z" {
		t.Fatalf("got %q", got)
	}
	long := strings.Repeat("s", api.MaxScheduleIDLength)
	if err := api.ValidateScheduleID(long); err != nil {
		t.Fatal(err)
	}
	if err := keel.ValidateSessionID(api.ScheduledSessionID(long, at)); err != nil {
		t.Fatalf("the longest schedule ID's session: %v", err)
	}
}

// Validate refuses what a caller may not send, typed, never repeating
// the value; it fills nothing in (docs/contract.md §22.2).
func TestScheduleValidate(t *testing.T) {
	ok := api.Schedule{ID: "s", ScheduleSpec: api.ScheduleSpec{Every: keel.Duration(time.Hour)}, Prompt: "p"}
	if err := ok.Validate(api.Limits{}); err != nil {
		t.Fatal(err)
	}
	change := func(f func(*api.Schedule)) api.Schedule { s := ok; f(&s); return s }
	for name, c := range map[string]struct {
		s    api.Schedule
		code keel.Code
	}{
		"no ID":             {change(func(s *api.Schedule) { s.ID = "" }), keel.CodeInvalidInput},
		"a dot in the ID":   {change(func(s *api.Schedule) { s.ID = "a.b" }), keel.CodeInvalidInput},
		"no time":           {change(func(s *api.Schedule) { s.Every = 0 }), keel.CodeInvalidInput},
		"a TZ in cron":      {change(func(s *api.Schedule) { s.Cron = "TZ=Asia/Tokyo 0 9 * * *" }), keel.CodeInvalidInput},
		"a long cron":       {change(func(s *api.Schedule) { s.Cron = strings.Repeat("1", api.MaxCronBytes+1) }), keel.CodeTooLarge},
		"a newline in cron": {change(func(s *api.Schedule) { s.Cron = "0 9 * * *\n0 10 * * *" }), keel.CodeInvalidInput},
		"a zone with dots":  {change(func(s *api.Schedule) { s.Timezone = "../x" }), keel.CodeInvalidInput},
		"a long jitter":     {change(func(s *api.Schedule) { s.Jitter = api.MaxScheduleJitter + 1 }), keel.CodeInvalidInput},
		"not UTF-8":         {change(func(s *api.Schedule) { s.Prompt = "\xff" }), keel.CodeInvalidInput},
		"a prompt over the worker's limit": {change(func(s *api.Schedule) { s.Prompt = strings.Repeat("p", 11) }),
			keel.CodeTooLarge},
		"a bad session":       {change(func(s *api.Schedule) { s.Session = "a b" }), keel.CodeInvalidInput},
		"steer a new session": {change(func(s *api.Schedule) { s.NewSession, s.Overlap = true, api.OverlapSteer }), keel.CodeInvalidInput},
		"a long catch-up":     {change(func(s *api.Schedule) { s.CatchupWindow = api.MaxCatchupWindow + 1 }), keel.CodeInvalidInput},
		"a spaced model":      {change(func(s *api.Schedule) { s.Config = &api.RunConfig{Model: "openai:gpt 4"} }), keel.CodeInvalidInput},
		"a backslash tool":    {change(func(s *api.Schedule) { s.Config = &api.RunConfig{Tools: []string{`..\x`}} }), keel.CodeInvalidInput},
		"a negative max_steps": {change(func(s *api.Schedule) { s.Config = &api.RunConfig{MaxSteps: -1} }),
			keel.CodeInvalidInput},
		"a child's session": {change(func(s *api.Schedule) { s.Session = "p--researcher-1-0123456789abcdef" }),
			keel.CodeInvalidInput},
		"an ID of a child's form": {change(func(s *api.Schedule) { s.ID = "p--researcher-1-0123456789abcdef" }),
			keel.CodeInvalidInput},
	} {
		lim := api.Limits{}
		if strings.Contains(name, "worker's limit") {
			lim.PromptBytes = 10
		}
		err := c.s.Validate(lim)
		var ke *keel.Error
		if !errors.As(err, &ke) || ke.Code != c.code {
			t.Errorf("%s: %v, want %s", name, err, c.code)
			continue
		}
		for _, v := range []string{"a.b", "Asia/Tokyo", "openai:gpt 4", `..\x`, "a b"} {
			if strings.Contains(ke.Message, v) {
				t.Errorf("%s: the error repeats %q: %s", name, v, ke.Message)
			}
		}
	}
}

// A change replaces what it sets; moving to a new session drops the
// session and overlap, moving to a session drops new_session.
func TestScheduleChangeApply(t *testing.T) {
	s := api.Schedule{ID: "s", ScheduleSpec: api.ScheduleSpec{Cron: "@daily", Every: keel.Duration(time.Hour)}, Prompt: "p",
		Session: "x", Overlap: api.OverlapQueue, Config: &api.RunConfig{Model: "m", Tools: []string{"t"}}}
	fresh, prompt := true, "q"
	got := api.ScheduleChange{NewSession: &fresh, Prompt: &prompt}.Apply(s)
	want := s
	want.Session, want.Overlap, want.NewSession, want.Prompt = "", "", true, "q"
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("(-want +got)\n%s", d)
	}
	back := "y"
	got = api.ScheduleChange{Session: &back, Config: &api.RunConfig{Model: "n"}}.Apply(got)
	if got.NewSession || got.Session != "y" || got.Config.Model != "n" || got.Config.Tools != nil || got.Cron != "@daily" {
		t.Fatalf("back to a session: %+v", got)
	}
}
