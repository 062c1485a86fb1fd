package gateway_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/gateway"
)

// The page shows a run's hook events (docs/contract.md §23): boundary
// input as context from its source, in a bubble of its own, never a
// person's steering; a hook's deny or rewrite on the card of its call,
// the new arguments with it; a failure and whether the run went on; a
// stop, before the run's end. A decision that does not decode is said to
// be not understood. The page reads transcript/testdata's hooks stream,
// with a hostile boundary input added before the run's end, from a
// stand-in for the session's routes (the page's own fetch, wrapped).
func TestWebPageShowsHooks(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a headless Chromium")
	}
	raw, err := os.ReadFile(filepath.Join("..", "..", "transcript", "testdata", "hooks.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var body strings.Builder
	var last, shift int64
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var env keel.Envelope
		if err := json.Unmarshal([]byte(line), &env); err != nil {
			t.Fatal(err)
		}
		if env.Type == keel.TypeRunFailed {
			// Input whose source and text are markup: all of it is text.
			hostile, err := keel.Seal(keel.BoundaryInputApplied{InputID: "in-x", Source: `<img src=x onerror="window.keelPwned=1">`,
				Point: keel.HookBeforeCommit, Step: 3, Text: "<b>bold</b>"}, env.SessionID, env.RunID, env.At)
			if err != nil {
				t.Fatal(err)
			}
			hostile.Seq = env.Seq
			writeSSE(t, &body, hostile)
			shift = 1
		}
		if env.Seq > 0 {
			env.Seq += shift
			last = max(last, env.Seq)
		}
		writeSSE(t, &body, env)
	}
	b := newBrowser(t)
	s := startGateway(t, gateway.Options{})
	b.do("load the page", chromedp.Navigate(s.srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#open-form")))
	state, _ := json.Marshal(map[string]any{"session_id": "hk", "state": "failed", "last_seq": last})
	eval[bool](b, `((events, state) => {
		const real = window.fetch;
		window.fetch = (url, init) => {
			const u = String(url);
			if (u.startsWith("/v1/sessions/hk/events")) {
				// The log, then a stream that stays open.
				const stream = new ReadableStream({start(c) { c.enqueue(new TextEncoder().encode(events)); }});
				return Promise.resolve(new Response(stream, {status: 200, headers: {"Content-Type": "text/event-stream"}}));
			}
			if (u === "/v1/sessions/hk") {
				return Promise.resolve(new Response(state, {status: 200, headers: {"Content-Type": "application/json"}}));
			}
			return real(url, init);
		};
		return true;
	})(`+strconv.Quote(body.String())+`, `+strconv.Quote(string(state))+`)`)
	b.open("hk")
	b.do("run failed", chromedp.WaitVisible(chromedp.CSS(`[data-type="run.failed"]`)))

	inputs := eval[[]string](b, `[...document.querySelectorAll(".boundary-input")].map((n) =>
		n.querySelector(".meta").textContent + " | " + n.querySelector(".bubble.context").textContent)`)
	want := []string{
		"context from mail · run_start | 2 new messages: invoice, lunch",
		"context from mail · before_step | 1 new message: \x1b[31mURGENT\x1b[0m\nreply today",
		"context from mail · before_commit | one more: the lunch moved",
		`context from <img src=x onerror="window.keelPwned=1"> · before_commit | <b>bold</b>`,
	}
	if !slices.Equal(inputs, want) {
		t.Fatalf("boundary inputs\n%q\nwant\n%q", inputs, want)
	}
	if n := eval[int](b, `document.querySelectorAll(".boundary-input.steering, .boundary-input .bubble.user, .boundary-input .retract").length`); n != 0 {
		t.Errorf("boundary input drawn as steering (%d)", n)
	}
	if n := eval[int](b, `document.querySelectorAll(".boundary-input img, .boundary-input b").length + (window.keelPwned ? 1000 : 0)`); n != 0 {
		t.Errorf("the hook's text became markup (%d)", n)
	}
	hooks := eval[[]string](b, `[...document.querySelectorAll(".hook-row")].map((n) =>
		(n.closest(".tool-card") ? n.closest(".tool-card").dataset.call + " " : "") + n.dataset.action + " " + n.textContent)`)
	want = []string{
		"c1 deny hook guard denied the call: invoices are kept",
		"c2 replace hook guard replaced the arguments of the call: kept in the workspace{\n \"path\": \"notes\"\n}",
		"c2 continued hook audit failed at after_tool: keel.HookFailed: audit log unreachable; the run goes on",
		"stop hook quota stopped the run at before_commit: the day's quota is spent",
	}
	if !slices.Equal(hooks, want) {
		t.Fatalf("hook rows\n%q\nwant\n%q", hooks, want)
	}
	if got := eval[string](b, `document.querySelector('[data-type="hook.decided"].dim').textContent`); got != "hook.decided (not understood)" {
		t.Errorf("the undecodable decision shows %q", got)
	}
	if got := eval[string](b, `document.querySelector('[data-type="run.failed"]').textContent`); got != "failed: keel.HookStopped: the day's quota is spent" {
		t.Errorf("the run's end %q", got)
	}
	b.screenshot("hooks")
}
