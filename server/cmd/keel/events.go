package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/live"
)

const eventsDesc = `Prints the durable events of SESSION after sequence --after, one line per
event ("#seq type summary"), and exits. With --follow it replays them and
then follows the session live, across runs, until Ctrl-C: durable events
exactly once and in order, and streamed deltas (shown without a sequence)
when the live channel (--nats) is reachable. --json prints one JSON envelope
per line instead.`

func cmdEvents(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("events", "keel events [flags] SESSION", eventsDesc)
	var conn connFlags
	conn.register(fs, true)
	after := fs.Int64("after", 0, "print the events after sequence `N`")
	follow := fs.Bool("follow", false, "keep following the session live")
	asJSON := fs.Bool("json", false, "print one JSON envelope per line")
	pos, code, ok := fs.parse(args, stdout, stderr, 1, 1)
	if !ok {
		return code
	}
	session := pos[0]
	if err := keel.ValidateSessionID(session); err != nil {
		return fs.usageError(stderr, "%v", err)
	}
	if *after < 0 {
		return fs.usageError(stderr, "--after must be 0 or more, got %d", *after)
	}
	if !*follow {
		conn.withNATS = false // deltas are never replayed
	}
	kc, err := conn.dial(ctx, stderr, api.RunConfig{})
	if err != nil {
		return fail(stderr, "events", err)
	}
	defer kc.close()

	print := func(env keel.Envelope) {
		fmt.Fprintln(stdout, eventLine(env))
	}
	if *asJSON {
		print = newJSONSink(stdout, stderr).Render
	}
	sess := kc.Session(session)
	if !*follow {
		evs, err := sess.EventsAfter(ctx, *after)
		for _, env := range evs {
			print(env)
		}
		if err != nil {
			return fail(stderr, "events", err)
		}
		return exitOK
	}
	for env, err := range sess.EventsFrom(ctx, *after) {
		if err != nil {
			var lag *live.LaggedError
			if errors.As(err, &lag) {
				fmt.Fprintf(stderr, "keel: %d live events missed\n", lag.Missed)
				continue
			}
			if ctx.Err() == nil {
				return fail(stderr, "events", err)
			}
			break
		}
		print(env)
	}
	// Ctrl-C is how a follow ends; the session ending is the other way.
	return exitOK
}

// eventLine is the one-line form of an event: "#seq type summary", or
// "type summary" for an ephemeral event.
func eventLine(env keel.Envelope) string {
	head := sanitizeLine(env.Type)
	if env.Durable() {
		head = "#" + strconv.FormatInt(env.Seq, 10) + " " + head
	}
	if env.Path != "" {
		// A child's delta relayed to its parent (docs/contract.md §21.4).
		head += " [" + sanitizeLine(env.Path) + "]"
	}
	if s := eventSummary(env); s != "" {
		return head + " " + s
	}
	return head
}

func eventSummary(env keel.Envelope) string {
	ev, err := env.Event()
	if err != nil {
		return "(undecodable: " + truncate(sanitizeLine(err.Error()), cardLineRunes) + ")"
	}
	switch e := ev.(type) {
	case keel.SessionForked:
		return fmt.Sprintf("from %s at %s · revision %d · seq %d · %d %s", sanitizeLine(e.Source), pointText(e.Run, e.Step),
			e.Revision, e.Seq, e.Messages, plural(e.Messages, "message", "messages"))
	case keel.SessionRewound:
		return fmt.Sprintf("from run %d (revision %d) to %s · revision %d · %d %s", e.FromRun, e.FromRevision,
			pointText(e.ToRun, e.ToStep), e.Revision, e.Messages, plural(e.Messages, "message", "messages"))
	case keel.RunStarted:
		return fmt.Sprintf("%s · run %d · %s · revision %d · %s", sanitizeLine(env.RunID), e.Number,
			sanitizeLine(e.Model), e.Revision, quote(e.Prompt))
	case keel.StepStarted:
		return fmt.Sprintf("step %d · ~%d context tokens", e.Step, e.EstimatedContextTokens)
	case keel.AgentStarted:
		return fmt.Sprintf("%s (%s) · session %s · %s", sanitizeLine(e.Agent), sanitizeLine(e.Path),
			sanitizeLine(e.SessionID), sanitizeLine(e.ToolCallID))
	case keel.AgentFinished:
		return fmt.Sprintf("%s (%s) %s · %d %s · %d in · %d out · %d %s", sanitizeLine(e.Agent), sanitizeLine(e.Path),
			sanitizeLine(string(e.Status)), e.Steps, plural(e.Steps, "step", "steps"), e.Usage.InputTokens,
			e.Usage.OutputTokens, e.Usage.Requests, plural(e.Usage.Requests, "request", "requests"))
	case keel.ToolProposed:
		return fmt.Sprintf("%s %s · %s", sanitizeLine(e.Name), compactArgs(e.Arguments), sanitizeLine(e.ToolCallID))
	case keel.ToolStarted:
		return fmt.Sprintf("%s · %s", sanitizeLine(e.Name), sanitizeLine(e.ToolCallID))
	case keel.ToolDetached:
		return fmt.Sprintf("%s · %s", sanitizeLine(e.Name), sanitizeLine(e.ToolCallID))
	case keel.ToolFinished:
		s := sanitizeLine(e.Name) + " " + sanitizeLine(string(e.Status))
		if e.Duration > 0 {
			s += " · " + fmtDuration(e.Duration.Std())
		}
		return s + " · " + quote(e.Output)
	case keel.HostInputRequested:
		return fmt.Sprintf("request %s · call %s · %s", sanitizeLine(e.RequestID), sanitizeLine(e.ToolCallID), quote(e.Prompt))
	case keel.HostInputResolved:
		s := fmt.Sprintf("request %s · call %s", sanitizeLine(e.RequestID), sanitizeLine(e.ToolCallID))
		if e.Interrupted {
			s += " · interrupted"
		}
		return s
	case keel.SteeringAccepted:
		return fmt.Sprintf("%s · %s", sanitizeLine(e.SteeringID), quote(e.Text))
	case keel.SteeringApplied:
		return sanitizeLine(e.SteeringID)
	case keel.SteeringRetracted:
		return sanitizeLine(e.SteeringID)
	case keel.BoundaryInputApplied, keel.HookDecided, keel.HookFailed:
		return hookEventSummary(e)
	case keel.UsageUpdated:
		return fmt.Sprintf("step %d attempt %d · %s · total %s", e.Step, e.Attempt, usageText(e.Usage), usageText(e.Total))
	case keel.BudgetWarning:
		return fmt.Sprintf("step %d · %s", e.Step, budgetWarningText(e))
	case keel.ModelWaiting:
		return fmt.Sprintf("step %d attempt %d · waiting %s for rate limit %s", e.Step, e.Attempt, fmtDuration(e.Wait.Std()),
			truncate(sanitizeLine(e.Limit), cardArgsRunes))
	case keel.HostedToolActivity:
		s := fmt.Sprintf("step %d attempt %d · %s", e.Step, e.Attempt, truncate(sanitizeLine(e.Name), cardArgsRunes))
		if e.ID != "" {
			s += " · " + truncate(sanitizeLine(e.ID), cardArgsRunes)
		}
		if e.Query != "" {
			s += " · query " + quote(e.Query)
		}
		if n := len(e.URLs); n > 0 {
			s += fmt.Sprintf(" · %d %s", n, plural(n, "URL", "URLs"))
		}
		if e.Detail != "" {
			s += " · " + quote(e.Detail)
		}
		return s
	case keel.ModelCallCompleted:
		m := e.Metrics
		return fmt.Sprintf("step %d attempt %d · %s %s · %s (first token %s) · %d in · %d out · %s",
			e.Step, e.Attempt, sanitizeLine(m.Provider), sanitizeLine(m.Model), fmtDuration(m.Duration.Std()),
			fmtDuration(m.TimeToFirstToken.Std()), m.InputTokens, m.OutputTokens, sanitizeLine(m.FinishReason))
	case keel.ProviderStreamReset:
		return fmt.Sprintf("step %d attempt %d abandoned · %s", e.Step, e.Attempt, resetReason(e.Reason))
	case keel.ProviderRequestRetry:
		return fmt.Sprintf("step %d attempt %d · waiting %s · %s", e.Step, e.Attempt, fmtDuration(e.Delay.Std()), retryCause(e))
	case keel.CompactionStarted:
		return fmt.Sprintf("~%d context tokens", e.EstimatedContextTokens)
	case keel.CompactionCompleted:
		return fmt.Sprintf("%d → %d messages", e.MessagesBefore, e.MessagesAfter)
	case keel.RunCompleted:
		return fmt.Sprintf("revision %d · %d %s · %s · %s", e.Revision, e.Steps, plural(e.Steps, "step", "steps"),
			usageText(e.Usage), quote(e.Text))
	case keel.RunCancelled:
		return fmt.Sprintf("revision %d", e.Revision)
	case keel.RunFailed:
		retry := "not retryable"
		if e.Retryable {
			retry = "retryable"
		}
		return fmt.Sprintf("%s · %s · %s · revision %d", sanitizeLine(string(e.Code)), quote(e.Message), retry, e.Revision)
	case keel.TextDelta:
		return fmt.Sprintf("step %d attempt %d · %s", e.Step, e.Attempt, quote(e.Text))
	case keel.ReasoningDelta:
		return fmt.Sprintf("step %d attempt %d · %s", e.Step, e.Attempt, quote(e.Text))
	case keel.ToolCallDelta:
		return fmt.Sprintf("step %d attempt %d · #%d %s %s", e.Step, e.Attempt, e.Index, sanitizeLine(e.Name), quote(e.Arguments))
	case keel.ToolProgress:
		return fmt.Sprintf("%s · %s", sanitizeLine(e.ToolCallID), quote(e.Message))
	}
	return truncate(sanitizeLine(string(env.Data)), cardLineRunes)
}

// quote shows untrusted text on one line as a Go string literal, cut to a
// readable length: control characters come out escaped, never raw.
func quote(s string) string {
	const max = 80
	cut := false
	if r := []rune(s); len(r) > max {
		s, cut = string(r[:max]), true
	}
	q := strconv.Quote(strings.ToValidUTF8(s, "\uFFFD"))
	if cut {
		q += "…"
	}
	return q
}

func usageText(u keel.Usage) string {
	return fmt.Sprintf("%d in · %d out · %d %s%s%s", u.InputTokens, u.OutputTokens, u.Requests, plural(u.Requests, "request", "requests"),
		searchesNote(u), costNote(u))
}

// pointText names a point of a session: after run N, or after step K of it.
func pointText(run, step int) string {
	if step > 0 {
		return fmt.Sprintf("step %d of run %d", step, run)
	}
	return fmt.Sprintf("run %d", run)
}
