package main

import (
	"fmt"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/transcript"
)

// The lines of a run's hook events (docs/contract.md §23), in the
// rendered run and in `keel events`. Every part of them came from a hook
// or its source, so each is sanitized and cut.

// boundaryInputText is the rendered line of boundary input: internal
// context from its source, never the "» steering" of a person.
func boundaryInputText(e keel.BoundaryInputApplied) string {
	return fmt.Sprintf("⇢ context from %s at %s: %s", truncate(sanitizeLine(e.Source), cardArgsRunes),
		sanitizeLine(string(e.Point)), truncate(firstLine(e.Text), cardLineRunes))
}

// hookDecidedText is the rendered line of a hook's intervention: on the
// card of the tool call it denied or rewrote ("│ hook guard denied
// delete_file: reason"), or a line of its own for a stop. run is the
// run as the transcript has it, to name the call's tool.
func hookDecidedText(e keel.HookDecided, run *transcript.Run) (style, text string) {
	hook := truncate(sanitizeLine(e.Hook), cardArgsRunes)
	why := ""
	if e.Reason != "" {
		why = ": " + truncate(sanitizeLine(e.Reason), cardLineRunes)
	}
	call := "call " + truncate(sanitizeLine(e.ToolCallID), cardArgsRunes)
	if run != nil {
		if t := run.Tool(e.ToolCallID); t != nil && t.Name != "" {
			call = truncate(sanitizeLine(t.Name), cardArgsRunes)
		}
	}
	switch e.Action {
	case keel.HookDeny:
		return styleYellow, fmt.Sprintf("│ hook %s denied %s%s", hook, call, why)
	case keel.HookReplace:
		return styleYellow, fmt.Sprintf("│ hook %s replaced the arguments of %s with %s%s", hook, call, compactArgs(e.Arguments), why)
	case keel.HookStop:
		return styleYellow, fmt.Sprintf("■ hook %s stopped the run at %s%s", hook, sanitizeLine(string(e.Point)), why)
	}
	return styleDim, fmt.Sprintf("· hook %s decided %s at %s%s", hook, truncate(sanitizeLine(string(e.Action)), cardArgsRunes),
		sanitizeLine(string(e.Point)), why)
}

// hookFailedText is the rendered line of a hook that failed after its
// retries, and what that did to the run.
func hookFailedText(e keel.HookFailed) (style, text string) {
	style, then := styleRed, "the run fails"
	if e.Continued {
		style, then = styleYellow, "the run goes on"
	}
	where := sanitizeLine(string(e.Point))
	if e.ToolCallID != "" {
		where += " (call " + truncate(sanitizeLine(e.ToolCallID), cardArgsRunes) + ")"
	}
	return style, fmt.Sprintf("! hook %s failed at %s: %s: %s; %s", truncate(sanitizeLine(e.Hook), cardArgsRunes), where,
		sanitizeLine(string(e.Code)), truncate(sanitizeLine(e.Message), cardLineRunes), then)
}

// hookEventSummary is the `keel events` summary of a hook event, "" for
// another event.
func hookEventSummary(ev keel.Event) string {
	switch e := ev.(type) {
	case keel.BoundaryInputApplied:
		return fmt.Sprintf("%s · from %s at %s · step %d · %s", sanitizeLine(e.InputID), sanitizeLine(e.Source),
			sanitizeLine(string(e.Point)), e.Step, quote(e.Text))
	case keel.HookDecided:
		s := fmt.Sprintf("%s %s at %s", sanitizeLine(e.Hook), sanitizeLine(string(e.Action)), sanitizeLine(string(e.Point)))
		if e.ToolCallID != "" {
			s += " · call " + sanitizeLine(e.ToolCallID)
		}
		if len(e.Arguments) > 0 {
			s += " · arguments " + compactArgs(e.Arguments)
		}
		if e.Reason != "" {
			s += " · " + quote(e.Reason)
		}
		return s
	case keel.HookFailed:
		s := fmt.Sprintf("%s at %s", sanitizeLine(e.Hook), sanitizeLine(string(e.Point)))
		if e.ToolCallID != "" {
			s += " · call " + sanitizeLine(e.ToolCallID)
		}
		s += " · " + sanitizeLine(string(e.Code)) + " · " + quote(e.Message)
		if e.Retryable {
			s += " · retryable"
		}
		if e.Continued {
			return s + " · continued"
		}
		return s + " · the run fails"
	}
	return ""
}
