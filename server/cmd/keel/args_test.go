package main

import (
	"bytes"
	"context"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/server/provider/scripted"
)

// call runs keel with args and returns its exit status and output.
func call(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = dispatch(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// closedAddress is a loopback address nothing listens on, so a command
// that got past its argument checks fails fast on connecting.
func closedAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // in stderr
	}{
		{nil, "Usage: keel COMMAND"},
		{[]string{"launch"}, `unknown command "launch"`},
		{[]string{"run"}, "missing argument PROMPT"},
		{[]string{"run", "   "}, "the prompt is empty"},
		{[]string{"run", "--bogus", "hi"}, "flag provided but not defined: -bogus"},
		{[]string{"run", "--max-steps", "-1", "hi"}, "--max-steps must be positive"},
		{[]string{"run", "--max-steps", "many", "hi"}, `invalid value "many" for flag -max-steps`},
		{[]string{"run", "--model", "my gpt", "hi"}, `--model "my gpt": want scripted:demo`},
		{[]string{"run", "--session", "bad id!", "hi"}, "--session: keel: session ID"},
		{[]string{"run", strings.Repeat("x", api.MaxPromptBytes+1)}, "the limit is"},
		{[]string{"run", "--once", "k", "hi"}, "--once needs --session"},
		{[]string{"send", "--session", "s", "--once", strings.Repeat("k", api.MaxOnceBytes+1), "hi"}, "--once is 257 bytes"},
		{[]string{"send"}, "missing argument PROMPT"},
		{[]string{"send", "--queue=maybe", "hi"}, "invalid boolean value"},
		{[]string{"events"}, "missing argument SESSION"},
		{[]string{"events", "a", "b"}, `unexpected argument "b"`},
		{[]string{"events", "s", "--after", "-1"}, "--after must be 0 or more"},
		{[]string{"events", "not/valid"}, "session ID"},
		{[]string{"state"}, "missing argument SESSION"},
		{[]string{"state", "s", "--run", "-2"}, "--run must be a run number"},
		{[]string{"history", "s", "--limit", "-1"}, "--offset and --limit must be 0 or more"},
		{[]string{"cancel"}, "missing argument SESSION"},
		{[]string{"cancel", "s", "--run", "x"}, `invalid value "x" for flag -run`},
		{[]string{"dev", "extra"}, `unexpected argument "extra"`},
		{[]string{"dev", "--port", "70000"}, "--port 70000 is not a port"},
		{[]string{"dev", "--data-dir", ""}, "--data-dir must name a directory"},
		{[]string{"dev", "--log-level", "loud"}, `--log-level "loud"`},
		{[]string{"worker", "--stop-timeout", "0s"}, "--stop-timeout must be positive"},
		{[]string{"worker", "--heartbeat-interval", "0s"}, "--heartbeat-interval must be positive"},
		{[]string{"worker", "--max-activities", "0"}, "--max-activities must be at least 1, got 0"},
		{[]string{"worker", "--sticky-cache", "-1"}, "--sticky-cache must be at least 1"},
		{[]string{"dev", "--workflow-pollers", "0"}, "--workflow-pollers must be at least 1"},
		{[]string{"help", "nope"}, `unknown command "nope"`},
		{[]string{"steer", "s"}, "missing argument TEXT"},
		{[]string{"steer", "s", " "}, "the steering text is empty"},
		{[]string{"steer", "--run", "-1", "s", "go"}, "--run must be a run number"},
		{[]string{"retract", "s"}, "missing argument STEERING_ID"},
		{[]string{"retract", "s", "a", "b"}, `unexpected argument "b"`},
		{[]string{"respond"}, "missing argument SESSION"},
		{[]string{"respond", "s", "q1"}, "missing argument ANSWER"},
		{[]string{"respond", "s", "q1", "yes", "extra"}, `unexpected argument "extra"`},
		{[]string{"shutdown"}, "confirm with --yes"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr := call(t, tc.args...)
			if code != exitUsage {
				t.Errorf("exit status %d, want %d (stderr %q)", code, exitUsage, stderr)
			}
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr %q does not contain %q", stderr, tc.want)
			}
			if !strings.Contains(stderr, "Usage: keel") {
				t.Errorf("stderr %q has no usage line", stderr)
			}
			if stdout != "" {
				t.Errorf("a usage error printed to stdout: %q", stdout)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	code, stdout, _ := call(t, "help")
	if code != exitOK || !strings.Contains(stdout, "Commands:") {
		t.Fatalf("keel help: status %d, stdout %q", code, stdout)
	}
	for _, c := range commands {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(stdout, "  "+c.name+" ") {
				t.Errorf("keel help does not list %s", c.name)
			}
			for _, args := range [][]string{{c.name, "--help"}, {c.name, "-h"}, {"help", c.name}} {
				code, out, errOut := call(t, args...)
				if code != exitOK || errOut != "" {
					t.Fatalf("%v: status %d, stderr %q", args, code, errOut)
				}
				usage, rest, ok := strings.Cut(out, "\n\n")
				if !ok || !strings.HasPrefix(usage, "Usage: keel "+c.name) {
					t.Fatalf("%v: no usage line first:\n%s", args, out)
				}
				desc, _, _ := strings.Cut(rest, "\n\n")
				if len(strings.Fields(desc)) < 25 {
					t.Errorf("%v: description is not a paragraph: %q", args, desc)
				}
			}
		})
	}
}

// TestFlagsAfterArguments checks that flags may follow positional
// arguments, and that "--" ends the flags.
func TestFlagsAfterArguments(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		wantPos    []string
		wantFollow bool
	}{
		{[]string{"S", "--follow"}, []string{"S"}, true},
		{[]string{"--follow", "S"}, []string{"S"}, true},
		{[]string{"S"}, []string{"S"}, false},
		{[]string{"--", "--follow"}, []string{"--follow"}, false},
		{[]string{"a", "--follow", "--", "-b", "c"}, []string{"a", "-b", "c"}, true},
	} {
		fs := newFlagSet("t", "keel t [flags] ARG", "test")
		follow := fs.Bool("follow", false, "")
		var out, errOut bytes.Buffer
		pos, code, ok := fs.parse(tc.args, &out, &errOut, 1, -1)
		if !ok {
			t.Fatalf("%q: status %d: %s", tc.args, code, errOut.String())
		}
		if diff := cmp.Diff(tc.wantPos, pos); diff != "" || *follow != tc.wantFollow {
			t.Errorf("%q: follow %v, positional (-want +got):\n%s", tc.args, *follow, diff)
		}
	}
}

func TestAnswerJSON(t *testing.T) {
	for _, tc := range []struct {
		in       string
		asString bool
		want     string
	}{
		{`{"approve":true}`, false, `{"approve":true}`},
		{`42`, false, `42`},
		{`"quoted"`, false, `"quoted"`},
		{`yes please`, false, `"yes please"`},
		{`42`, true, `"42"`},
		{`{"a":`, false, `"{\"a\":"`},
	} {
		if got := string(answerJSON(tc.in, tc.asString)); got != tc.want {
			t.Errorf("answerJSON(%q, %v) = %s, want %s", tc.in, tc.asString, got, tc.want)
		}
	}
}

func TestPromptConfig(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want api.RunConfig
	}{
		{nil, api.RunConfig{Model: "scripted:demo", Tools: scripted.DemoTools}},
		{[]string{"--model", "openai:gpt-x"}, api.RunConfig{Model: "openai:gpt-x"}},
		{[]string{"--model", "local"}, api.RunConfig{Model: "local"}},
		{[]string{"--model", "openai:gpt-x", "--tools", "read_file, list_files"},
			api.RunConfig{Model: "openai:gpt-x", Tools: []string{"read_file", "list_files"}}},
		{[]string{"--tools", ""}, api.RunConfig{Model: "scripted:demo", Tools: []string{}}},
		{[]string{"--max-steps", "3"}, api.RunConfig{Model: "scripted:demo", Tools: scripted.DemoTools, MaxSteps: 3}},
		{[]string{"--approve-ask", "write_file, sleep"}, api.RunConfig{Model: "scripted:demo", Tools: scripted.DemoTools,
			Approvals: map[string]api.Approval{"write_file": api.ApprovalAsk, "sleep": api.ApprovalAsk}}},
		{[]string{"--approve-ask", "*"}, api.RunConfig{Model: "scripted:demo", Tools: scripted.DemoTools,
			Approvals: map[string]api.Approval{"*": api.ApprovalAsk}}},
		// An empty list asks for nothing: no policy at all, not an empty one.
		{[]string{"--approve-ask", ""}, api.RunConfig{Model: "scripted:demo", Tools: scripted.DemoTools}},
		// Hooks in the order given (docs/contract.md §23); with an agent
		// they stay, after the agent's own.
		{[]string{"--hook", "guard", "--hook", "audit"}, api.RunConfig{Model: "scripted:demo", Tools: scripted.DemoTools,
			Hooks: []string{"guard", "audit"}}},
		{[]string{"--agent", "planner", "--hook", "guard"}, api.RunConfig{Agent: "planner", Hooks: []string{"guard"}}},
	} {
		fs := newFlagSet("t", "keel t", "test")
		var p promptFlags
		p.register(fs)
		var out, errOut bytes.Buffer
		if _, code, ok := fs.parse(tc.args, &out, &errOut, 0, 0); !ok {
			t.Fatalf("%q: status %d: %s", tc.args, code, errOut.String())
		}
		got := p.config()
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%q: config (-want +got):\n%s", tc.args, diff)
		}
		if tc.want.Tools != nil && got.Tools == nil {
			t.Errorf("%q: an explicit empty tool list became nil (the session default)", tc.args)
		}
	}
	// The config is the run's own: changing it must not touch the demo's list.
	fs := newFlagSet("t", "keel t", "test")
	var p promptFlags
	p.register(fs)
	cfg := p.config()
	cfg.Tools[0] = "changed"
	if slices.Contains(scripted.DemoTools, "changed") {
		t.Fatal("config shares scripted.DemoTools")
	}
}

// TestUnreachableServer checks that a command whose arguments are fine
// fails with status 1 and says what to do when no server answers.
func TestUnreachableServer(t *testing.T) {
	addr := closedAddress(t)
	for _, args := range [][]string{
		{"run", "--address", addr, "--nats", "", "hi"},
		{"send", "--address", addr, "hi"},
		{"events", "--address", addr, "s1"},
		{"state", "--address", addr, "s1"},
		{"history", "--address", addr, "s1"},
		{"cancel", "--address", addr, "s1"},
		{"steer", "--address", addr, "s1", "go"},
		{"retract", "--address", addr, "s1", "st-1"},
		{"respond", "--address", addr, "s1", "q1", "yes"},
		{"shutdown", "--address", addr, "--yes"},
		{"upgrade", "--address", addr},
		{"worker", "--address", addr, "--nats", "", "--workspace", t.TempDir()},
	} {
		code, _, stderr := call(t, args...)
		if code != exitFailed {
			t.Errorf("%v: exit status %d, want %d", args, code, exitFailed)
		}
		if !strings.Contains(stderr, addr) || !strings.Contains(stderr, "keel dev") {
			t.Errorf("%v: stderr does not name the address and how to start a server: %q", args, stderr)
		}
	}
}
