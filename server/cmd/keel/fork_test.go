package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
)

// TestForkAndRewindCommands: keel fork makes a session from another's
// conversation at a run (printing the generated ID, or the one asked for,
// once however often it is asked), keel rewind makes a session go on from
// an earlier run, and both refuse what they must (docs/contract.md §19).
func TestForkAndRewindCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	clearTemporalEnv(t)
	ctx, cancel := context.WithTimeout(withNoInput(context.Background()), 2*time.Minute)
	defer cancel()
	srv := startWorkerWithConfig(t, ctx, map[string]string{
		"answer.json": `{"repeat":true,"turns":[{"text":["An answer."]}]}`,
		"keel.yaml":   "models:\n  answer:\n    provider: scripted\n    model: answer.json\ndefault_model: answer\nworkspace: ./ws\n",
	})
	addr := []string{"--address", srv.Address()}
	c, err := client.Dial(ctx, client.Options{HostPort: srv.Address()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := 1; i <= 3; i++ {
		run, err := c.Session("src").Send(ctx, fmt.Sprintf("prompt %d", i), client.WithConfig(api.RunConfig{Model: "answer"}))
		if err != nil {
			t.Fatal(err)
		}
		if out, err := run.Outcome(ctx); err != nil || out.Status != keel.StatusCompleted {
			t.Fatalf("run %d: %+v, %v", i, out, err)
		}
	}
	history := func(session string) []keel.Message {
		t.Helper()
		code, out, errOut := keelCmd(ctx, append([]string{"history", "--json", session}, addr...)...)
		if code != exitOK {
			t.Fatalf("history %s: status %d: %s", session, code, errOut)
		}
		var page api.HistoryPage
		if err := json.Unmarshal([]byte(out), &page); err != nil {
			t.Fatal(err)
		}
		return page.Messages
	}
	src := history("src")
	if len(src) != 6 {
		t.Fatalf("source history has %d messages, want 6", len(src))
	}

	code, out, errOut := keelCmd(ctx, append([]string{"fork", "src", "--at-run", "2"}, addr...)...)
	if code != exitOK {
		t.Fatalf("fork: status %d: %s", code, errOut)
	}
	gen := strings.TrimSpace(out)
	if err := keel.ValidateSessionID(gen); err != nil || gen == "src" {
		t.Fatalf("fork printed %q, want the new session's ID", out)
	}
	for range 2 {
		code, out, errOut = keelCmd(ctx, append([]string{"fork", "src", "--at-run", "1", "--into", "f1"}, addr...)...)
		if code != exitOK || strings.TrimSpace(out) != "f1" {
			t.Fatalf("fork --into f1: status %d, %q: %s", code, out, errOut)
		}
	}
	if got := history(gen); fmt.Sprint(got) != fmt.Sprint(src[:4]) {
		t.Errorf("fork at run 2: %v, want %v", got, src[:4])
	}
	if got := history("f1"); fmt.Sprint(got) != fmt.Sprint(src[:2]) {
		t.Errorf("fork at run 1: %v, want %v", got, src[:2])
	}
	st, err := c.Session("f1").State(ctx)
	if err != nil || st.Parent == nil || st.Parent.Source != "src" || st.Parent.Run != 1 || st.Parent.Revision != 1 {
		t.Fatalf("f1's parent: %+v, %v", st.Parent, err)
	}
	evs, err := c.Session("f1").EventsAfter(ctx, 0)
	if err != nil || len(evs) != 1 || evs[0].Type != keel.TypeSessionForked {
		t.Fatalf("f1's log: %v, %v; want one session.forked", evs, err)
	}

	// keel run on the fork goes on from the point, as its run 1; keel state
	// names its parent.
	code, out, errOut = keelCmd(ctx, append([]string{"run", "--nats", "", "--session", "f1", "--model", "answer", "on the fork"}, addr...)...)
	if code != exitOK || !strings.Contains(out, "run 1") {
		t.Fatalf("keel run on the fork: status %d\n%s\n%s", code, out, errOut)
	}
	if got := history("f1"); len(got) != 4 || fmt.Sprint(got[:2]) != fmt.Sprint(src[:2]) || got[2].Content != "on the fork" {
		t.Errorf("the fork after its run: %v", got)
	}
	code, out, errOut = keelCmd(ctx, append([]string{"state", "f1"}, addr...)...)
	if code != exitOK || !strings.Contains(out, `"parent"`) || !strings.Contains(out, `"source": "src"`) {
		t.Errorf("keel state f1: status %d\n%s\n%s", code, out, errOut)
	}
	// keel state of the source lists its forks, once visibility has them
	// (it lags the start a little: asked again until then).
	wantForks := fmt.Sprintf("\"forks\": [\n    %q,\n    %q\n  ]", min(gen, "f1"), max(gen, "f1"))
	for {
		code, out, errOut = keelCmd(ctx, append([]string{"state", "src"}, addr...)...)
		if code != exitOK {
			t.Fatalf("keel state src: status %d\n%s", code, errOut)
		}
		if strings.Contains(out, wantForks) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("keel state src never listed %s and f1 as its forks:\n%s", gen, out)
		case <-time.After(50 * time.Millisecond):
		}
	}

	// The same ID at another point, or a session that is no fork, is refused.
	for _, args := range [][]string{
		{"fork", "src", "--at-run", "2", "--into", "f1"},
		{"fork", "f1", "--at-run", "0", "--into", "src"},
		{"fork", "src", "--at-run", "9", "--into", "f9"},
	} {
		if code, _, errOut := keelCmd(ctx, append(args, addr...)...); code != exitFailed {
			t.Errorf("keel %v: status %d, want %d: %s", args, code, exitFailed, errOut)
		}
	}
	for _, args := range [][]string{
		{"fork", "src"},
		{"fork", "src", "--at-run", "1", "--into", "../x"},
		{"fork", "src", "--at-run", "0", "--at-step", "1"},
		{"rewind", "src;rm", "--to-run", "1"},
		{"rewind", "src", "--to-run", "-1"},
	} {
		if code, _, errOut := keelCmd(ctx, append(args, addr...)...); code != exitUsage {
			t.Errorf("keel %v: status %d, want %d: %s", args, code, exitUsage, errOut)
		}
	}

	code, out, errOut = keelCmd(ctx, append([]string{"rewind", "src", "--to-run", "1"}, addr...)...)
	if code != exitOK || !strings.Contains(out, "rewound src from run 3") {
		t.Fatalf("rewind: status %d, %q: %s", code, out, errOut)
	}
	if got := history("src"); fmt.Sprint(got) != fmt.Sprint(src[:2]) {
		t.Errorf("after the rewind: %v, want %v", got, src[:2])
	}
	run, err := c.Session("src").Send(ctx, "after the rewind", client.WithConfig(api.RunConfig{Model: "answer"}))
	if err != nil || run.Number != 4 {
		t.Fatalf("the run after the rewind: %v, %v; want run 4", run, err)
	}
	if _, err := run.Outcome(ctx); err != nil {
		t.Fatal(err)
	}
	if got := history("src"); len(got) != 4 || got[2].Content != "after the rewind" {
		t.Errorf("after the rewind and a run: %v", got)
	}
	all, err := c.Session("src").EventsAfter(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	rewound := 0
	for i, ev := range all {
		if ev.Seq != int64(i+1) {
			t.Fatalf("log not dense at %d: seq %d", i, ev.Seq)
		}
		if ev.Type == keel.TypeSessionRewound {
			rewound++
		}
	}
	if rewound != 1 {
		t.Errorf("%d session.rewound events, want 1", rewound)
	}
	// The fork made before the rewind is untouched by it.
	if got := history(gen); fmt.Sprint(got) != fmt.Sprint(src[:4]) {
		t.Errorf("the fork after its source's rewind: %v", got)
	}
}
