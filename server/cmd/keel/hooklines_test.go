package main

import (
	"strings"
	"testing"

	"github.com/keelrun/keel"
)

// A hook's decision reads as what it did: on a call the transcript never
// saw it names the call's ID, a decision this version does not know is a
// plain line, and whatever the hook sent stays on its line, cut.
func TestHookDecidedText(t *testing.T) {
	long := strings.Repeat("r", 300)
	for _, tc := range []struct {
		ev    keel.HookDecided
		style string
		want  string
	}{
		{keel.HookDecided{Hook: "guard", Point: keel.HookBeforeTool, Action: keel.HookDeny, ToolCallID: "c9"}, styleYellow,
			"│ hook guard denied call c9"},
		{keel.HookDecided{Hook: "guard", Point: keel.HookBeforeTool, Action: keel.HookReplace, ToolCallID: "c9",
			Arguments: args(`{"a":1}`), Reason: "two\nlines\x1b[2J"}, styleYellow,
			`│ hook guard replaced the arguments of call c9 with {"a":1}: two lines[2J`},
		{keel.HookDecided{Hook: "quota", Point: keel.HookBeforeStep, Action: keel.HookStop, Reason: long}, styleYellow,
			"■ hook quota stopped the run at before_step: " + strings.Repeat("r", cardLineRunes-1) + "…"},
		{keel.HookDecided{Hook: "h", Point: keel.HookAfterTool, Action: "pause"}, styleDim, "· hook h decided pause at after_tool"},
	} {
		style, got := hookDecidedText(tc.ev, nil)
		if got != tc.want || style != tc.style {
			t.Errorf("hookDecidedText(%+v) = %q %q, want %q %q", tc.ev, style, got, tc.style, tc.want)
		}
	}
}

// A hook's failure says whether the run went on.
func TestHookFailedText(t *testing.T) {
	e := keel.HookFailed{Hook: "audit", Point: keel.HookBeforeCommit, Code: keel.CodeHookFailed, Message: "down"}
	if style, got := hookFailedText(e); style != styleRed || got != "! hook audit failed at before_commit: keel.HookFailed: down; the run fails" {
		t.Errorf("failing: %q %q", style, got)
	}
	e.Continued = true
	if style, got := hookFailedText(e); style != styleYellow || !strings.HasSuffix(got, "; the run goes on") {
		t.Errorf("continued: %q %q", style, got)
	}
}
