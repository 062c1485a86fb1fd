package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/server/gateway"
)

// The page's lineage, fork and rewind (docs/contract.md §19): after two
// runs, "Fork from here" on run 1 opens a new session that shows its
// parent; the parent's link opens the source again, where "Rewind to
// here" on run 1, once confirmed, shows the rewound line, marks run 2 as
// gone from the history, and leaves the history that the model sees
// ending at run 1 (the fork's history exactly). A step offers both too,
// and a run still active offers neither.
func TestWebPageForkAndRewind(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a headless Chromium")
	}
	b := newBrowser(t)
	s := startGateway(t, gateway.Options{})
	b.do("load the page", chromedp.Navigate(s.srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#open-form")))
	history := func(id string) api.HistoryPage {
		t.Helper()
		var page api.HistoryPage
		if err := json.Unmarshal(s.call(t, http.MethodGet, "/v1/sessions/"+id+"/history", nil).must(t, http.StatusOK).raw, &page); err != nil {
			t.Fatal(err)
		}
		return page
	}
	const src = "web-fork-src"
	const run1 = `.run-start[data-run="` + src + `/run-1"]`
	const run2 = `.run-start[data-run="` + src + `/run-2"]`

	b.open(src)
	// Run 1 waits in a tool: while it is active, its point is not
	// committed and neither button can be used.
	// One script for the test's model, whose turns go on across runs.
	m := model(t, `{"turns":[
		{"text":["Let me look."],"tool_calls":[{"id":"g1","name":"gate","arguments":{"key":"web-fork-1"}}]},
		{"text":["one"]},
		{"text":["two"]}]}`)
	b.send("first", m, "gate")
	b.do("run 1 in its tool", chromedp.WaitVisible(chromedp.CSS(`.tool-card[data-call="g1"][data-status="running"]`)))
	if !eval[bool](b, `[...document.querySelectorAll('`+run1+` .point-actions button')].every((b) => b.disabled)`) {
		t.Fatal("fork or rewind offered on a run still active")
	}
	shared.gates.open("web-fork-1")
	poll[bool](b, "run 1 completed", `document.querySelectorAll('[data-type="run.completed"]').length === 1`)
	poll[bool](b, "fork offered on run 1 and its steps", `(() => {
		const bs = [...document.querySelectorAll('[data-run="`+src+`/run-1"] .point-actions button')];
		return bs.length === 6 && bs.every((b) => !b.disabled);
	})()`)
	poll[bool](b, "state completed", `document.getElementById("state").dataset.state === "completed"`)
	b.send("second", m, "")
	poll[bool](b, "run 2 completed", `document.querySelectorAll('[data-type="run.completed"]').length === 2 &&
		!document.querySelector('`+run2+` .fork-here').disabled`)
	poll[bool](b, "state completed after run 2", `document.getElementById("state").dataset.state === "completed"`)
	before := history(src)
	if len(before.Messages) < 6 {
		t.Fatalf("history after two runs: %d messages", len(before.Messages))
	}
	if !eval[bool](b, `document.getElementById("lineage").hidden`) {
		t.Fatal("lineage shown for a session that is no fork")
	}
	b.screenshot("two-runs")

	// Fork from run 1: the page opens the new session and shows its parent.
	b.do("fork from run 1", chromedp.Click(chromedp.CSS(run1+` .fork-here`)))
	fork := poll[string](b, "fork opened", `(() => {
		const id = document.getElementById("session-id").textContent;
		const l = document.getElementById("lineage");
		return id !== "`+src+`" && !l.hidden && l.textContent.includes("after run 1") &&
			l.querySelector("a.session-link").textContent === "`+src+`" &&
			!!document.querySelector('[data-type="session.forked"]') && id;
	})()`)
	if !eval[bool](b, `document.getElementById("forks").hidden && document.getElementById("forks").childElementCount === 0`) {
		t.Fatal("forks shown for a session that has none")
	}
	var st api.SessionStatus
	if err := json.Unmarshal(s.call(t, http.MethodGet, "/v1/sessions/"+fork, nil).must(t, http.StatusOK).raw, &st); err != nil {
		t.Fatal(err)
	}
	if st.Parent == nil || st.Parent.Source != src || st.Parent.Run != 1 || st.Parent.Step != 0 {
		t.Fatalf("fork %s has parent %+v", fork, st.Parent)
	}
	forked := history(fork)
	b.screenshot("forked")

	// Back to the source through the parent's link.
	b.do("open the parent", chromedp.Click(chromedp.CSS(`#lineage a.session-link`)))
	poll[bool](b, "source open again", `document.getElementById("session-id").textContent === "`+src+`" &&
		document.querySelectorAll('[data-type="run.completed"]').length === 2 && document.getElementById("lineage").hidden &&
		!document.querySelector('`+run1+` .rewind-here').disabled`)

	// A declined confirmation rewinds nothing.
	eval[bool](b, `window.confirmed = []; window.confirm = (m) => { window.confirmed.push(m); return false; }, true`)
	// The page may still redraw the source's runs (their buttons disabled
	// until it has seen each run end), and a click on a disabled button
	// is lost: click until the page asked.
	poll[bool](b, "the declined rewind asked", `(() => {
		const r = document.querySelector('`+run1+` .rewind-here');
		if (window.confirmed.length === 0 && r && !r.disabled) r.click();
		return window.confirmed.length === 1;
	})()`)
	if n := len(history(src).Messages); n != len(before.Messages) {
		t.Fatalf("a declined rewind left %d messages, want %d", n, len(before.Messages))
	}
	// Accepted, it rewinds to run 1.
	eval[bool](b, `window.confirm = (m) => { window.confirmed.push(m); return true; }, true`)
	poll[bool](b, "the accepted rewind asked", `(() => {
		const r = document.querySelector('`+run1+` .rewind-here');
		if (window.confirmed.length === 1 && r && !r.disabled) r.click();
		return window.confirmed.length === 2;
	})()`)
	line := poll[string](b, "rewound line", `(() => {
		const r = document.querySelector('[data-type="session.rewound"]');
		return r && document.querySelector('`+run2+`').dataset.left === "true" && r.textContent;
	})()`)
	if !strings.Contains(line, "from after run 2") || !strings.Contains(line, "to after run 1") {
		t.Fatalf("rewound line %q", line)
	}
	// The source lists its fork, as a link to it, once Temporal's
	// visibility has it (the page asks again with the session's state,
	// which the rewind refreshed).
	links := poll[[]string](b, "the fork listed", `(() => {
		const f = document.getElementById("forks");
		const as = [...f.querySelectorAll("a.session-link")];
		return !f.hidden && as.length > 0 && as.map((a) => a.textContent + " " + a.getAttribute("href"));
	})()`)
	if want := []string{fork + " #session=" + fork}; !cmp.Equal(links, want) {
		t.Fatalf("forks listed %q, want %q", links, want)
	}
	asked := eval[[]string](b, `window.confirmed`)
	if len(asked) != 2 || !strings.Contains(asked[1], "after run 1") || !strings.Contains(asked[1], "leave the model's history") {
		t.Fatalf("confirmations asked: %q", asked)
	}
	if !eval[bool](b, `document.querySelector('`+run2+` .fork-here').disabled && !document.querySelector('`+run1+` .fork-here').disabled`) {
		t.Fatal("fork still offered on a run the rewind left, or not on run 1")
	}
	after := history(src)
	if diff := cmp.Diff(forked.Messages, after.Messages); diff != "" {
		t.Fatalf("history after the rewind differs from the fork at run 1 (-fork +rewound):\n%s", diff)
	}
	if len(after.Messages) >= len(before.Messages) || !cmp.Equal(before.Messages[:len(after.Messages)], after.Messages) {
		t.Fatalf("history after the rewind: %d messages, not a prefix of the %d before", len(after.Messages), len(before.Messages))
	}
	b.screenshot("rewound")

	// An API error is shown, typed, and the page goes on: a fork into an
	// ID that exists already with another origin.
	eval[bool](b, `window.fetchOrig = window.fetch; window.fetch = (u, init) => {
		if (String(u).endsWith("/fork")) return Promise.resolve(new Response(JSON.stringify({code: "conflict", message: "<b>no</b>"}), {status: 409}));
		return window.fetchOrig(u, init);
	}, true`)
	b.do("fork refused", chromedp.Click(chromedp.CSS(run1+` .fork-here`)))
	poll[bool](b, "error shown", `(() => { const e = document.getElementById("error");
		return !e.hidden && e.textContent === "conflict: <b>no</b>" && !e.querySelector("b") &&
			document.getElementById("session-id").textContent === "`+src+`"; })()`)
}
