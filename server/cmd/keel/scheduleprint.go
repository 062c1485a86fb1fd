package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/keelrun/keel/api"
)

// printScheduleStatus writes a schedule's description for a terminal.
// What a caller wrote (the prompt, the note) is sanitized: a schedule's
// fields come from whoever could create it.
func printScheduleStatus(w io.Writer, st api.ScheduleStatus) {
	s := st.Schedule
	state := "active"
	if st.Paused {
		state = "paused"
		if st.PausedByFailure {
			state = "paused by a failed firing"
		}
	}
	fmt.Fprintf(w, "schedule %s (%s)\n", s.ID, state)
	if st.Note != "" {
		fmt.Fprintf(w, "  note      %s\n", truncate(sanitizeLine(st.Note), 200))
	}
	if st.Failure != nil {
		fmt.Fprintf(w, "  failure   %s: %s\n", st.Failure.Code, truncate(sanitizeLine(st.Failure.Message), 200))
	}
	fmt.Fprintf(w, "  fires     %s\n", specText(s.ScheduleSpec))
	fmt.Fprintf(w, "  prompt    %s\n", truncate(firstLine(s.Prompt), 100))
	if s.NewSession {
		fmt.Fprintf(w, "  session   a new one each firing (%s-YYYYMMDDTHHMMSSZ)\n", s.ID)
	} else {
		fmt.Fprintf(w, "  session   %s (overlap: %s)\n", s.Target(), s.OverlapOrDefault())
	}
	if c := configText(s.Config); c != "" {
		fmt.Fprintf(w, "  run       %s\n", c)
	}
	policy := "catch-up window " + s.CatchupOrDefault().String()
	if s.PauseOnFailure {
		policy = "pause on failure; " + policy
	}
	fmt.Fprintf(w, "  policy    %s\n", policy)
	fmt.Fprintf(w, "  fired     %d times", st.Fired)
	if st.Missed > 0 {
		fmt.Fprintf(w, " (%d missed: later than the catch-up window)", st.Missed)
	}
	fmt.Fprintln(w)
	for i, t := range st.Next {
		if i == 3 {
			break
		}
		label := ""
		if i == 0 {
			label = "next"
		}
		fmt.Fprintf(w, "  %-9s %s\n", label, t.UTC().Format(time.RFC3339))
	}
	if len(st.Recent) > 0 {
		fmt.Fprintln(w, "  recent firings:")
	}
	for _, f := range st.Recent {
		fmt.Fprintf(w, "    %s  %-8s %s\n", f.ScheduledAt.UTC().Format(time.RFC3339), f.Status, firingText(f))
	}
}

// specText says when a schedule fires.
func specText(sp api.ScheduleSpec) string {
	var parts []string
	if sp.Cron != "" {
		c := fmt.Sprintf("cron %q", sp.Cron)
		if sp.Timezone != "" {
			c += " in " + sp.Timezone
		}
		parts = append(parts, c)
	}
	if sp.Every > 0 {
		parts = append(parts, "every "+sp.Every.String())
	}
	s := strings.Join(parts, " and ")
	if sp.Jitter > 0 {
		s += ", jitter up to " + sp.Jitter.String()
	}
	return s
}

// configText summarizes a schedule's run configuration.
func configText(c *api.RunConfig) string {
	if c == nil {
		return ""
	}
	var parts []string
	if c.Model != "" {
		parts = append(parts, "model "+sanitizeLine(c.Model))
	}
	if c.Tools != nil {
		t := strings.Join(c.Tools, ",")
		if t == "" {
			t = "none"
		}
		parts = append(parts, "tools "+sanitizeLine(t))
	}
	if c.MaxSteps > 0 {
		parts = append(parts, fmt.Sprintf("max %d steps", c.MaxSteps))
	}
	if c.Budget != nil {
		parts = append(parts, "a budget")
	}
	if len(c.Hooks) > 0 {
		parts = append(parts, "hooks "+sanitizeLine(strings.Join(c.Hooks, ",")))
	}
	return strings.Join(parts, ", ")
}

// firingText says what one firing did.
func firingText(f api.ScheduleFiring) string {
	r := f.Result
	switch {
	case f.Error != nil:
		s := fmt.Sprintf("%s: %s", f.Error.Code, truncate(sanitizeLine(f.Error.Message), 120))
		if r != nil && r.RunID != "" {
			s = r.RunID + " " + s
		}
		return s
	case r == nil:
		return ""
	case r.Skipped:
		return "(" + r.RunID + " was active)"
	case r.SteeringID != "":
		return fmt.Sprintf("%s steered (%s)", r.RunID, r.SteeringID)
	}
	s := r.RunID
	if r.Queued && f.Run == "" {
		s += " queued"
	}
	if f.Run != "" {
		s += " " + string(f.Run)
	}
	return s
}

// timeOrDash formats an optional time.
func timeOrDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
