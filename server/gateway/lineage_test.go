package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/server/gateway"
)

// A key limited to lin_a- reads a fork that an unlimited key made of
// another team's session (lin_b-src) into its prefix. It reads the fork,
// whose conversation is its own, but no route tells it the source's ID or
// its sequence: not the state's parent, not session.forked in the events
// page, the SSE stream or AG-UI, not a refused fork into that ID, not the
// forks list or the session list. A fork of the fork (its source under
// the prefix) shows its parent whole, and a key whose prefix covers both
// teams (lin_) sees the source (docs/security.md, "Lineage";
// docs/contract.md §19.1).
func TestLineageOutsideAKeysPrefix(t *testing.T) {
	const full, team, wide = "lin-full-key-0123456789", "lin-team-key-0123456789", "lin-wide-key-0123456789"
	s := startGateway(t, gateway.Options{Keys: []gateway.APIKey{{Key: full}, {Key: team, Prefix: "lin_a-"}, {Key: wide, Prefix: "lin_"}}})
	as := func(key string) *stack { c := *s; c.key = key; return &c }
	const secret = "lin_b-"
	m := model(t, `{"repeat":true,"turns":[{"text":["answer"]}]}`)
	s.send(t, "lin_b-src", map[string]any{"prompt": "prompt", "model": m, "tools": []string{}})
	waitForEvent(t, testCtx(t), "lin_b-src", keel.TypeRunCompleted, 1)
	var made gateway.ForkResponse
	r := s.call(t, http.MethodPost, "/v1/sessions/lin_b-src/fork", map[string]any{"run": 1, "into": "lin_a-fork"}).must(t, http.StatusCreated)
	if err := json.Unmarshal(r.raw, &made); err != nil || made.Parent.Source != "lin_b-src" || made.Parent.Seq == 0 {
		t.Fatalf("the unlimited key's fork: %s (%v)", r.raw, err)
	}

	// leaks fails the test if a body the team's key read names the other
	// team's session.
	leaks := func(what string, body []byte) {
		t.Helper()
		if strings.Contains(string(body), secret) {
			t.Errorf("%s tells a key limited to lin_a- of %s: %s", what, secret, body)
		}
	}
	state := func(k *stack, id string) api.SessionStatus {
		t.Helper()
		r := k.call(t, http.MethodGet, "/v1/sessions/"+id, nil).must(t, http.StatusOK)
		if k.key == team {
			leaks("GET /v1/sessions/"+id, r.raw)
		}
		var st api.SessionStatus
		if err := json.Unmarshal(r.raw, &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	hidden := made.Parent
	hidden.Source, hidden.Seq = "", 0
	for key, want := range map[string]api.ForkOrigin{full: made.Parent, wide: made.Parent, team: hidden} {
		if st := state(as(key), "lin_a-fork"); st.Parent == nil || *st.Parent != want {
			t.Errorf("the fork's parent to key %s: %+v, want %+v", key[:8], st.Parent, want)
		}
	}

	// The events page: session.forked without the source.
	r = as(team).call(t, http.MethodGet, "/v1/sessions/lin_a-fork/events", nil).must(t, http.StatusOK)
	leaks("GET .../events", r.raw)
	var page gateway.EventsPage
	if err := json.Unmarshal(r.raw, &page); err != nil || len(page.Events) != 1 {
		t.Fatalf("the fork's events: %s (%v)", r.raw, err)
	}
	forked := func(env keel.Envelope) keel.SessionForked {
		t.Helper()
		ev, err := env.Event()
		f, ok := ev.(keel.SessionForked)
		if err != nil || !ok || env.Seq != 1 {
			t.Fatalf("not session.forked at seq 1: %+v (%v)", env, err)
		}
		return f
	}
	want := keel.SessionForked{Run: 1, Revision: made.Parent.Revision, Messages: 2}
	if got := forked(page.Events[0]); got != want {
		t.Errorf("session.forked to the team's key: %+v, want %+v", got, want)
	}
	r = as(wide).call(t, http.MethodGet, "/v1/sessions/lin_a-fork/events", nil).must(t, http.StatusOK)
	if err := json.Unmarshal(r.raw, &page); err != nil || len(page.Events) != 1 || forked(page.Events[0]).Source != "lin_b-src" {
		t.Errorf("session.forked to a key covering both: %s (%v)", r.raw, err)
	}

	// A run on the fork through AG-UI, then the whole log as SSE.
	tm := as(team)
	for _, ev := range tm.aguiOpen(t, testCtx(t), aguiInput("lin_a-fork", "agui-1", "on the fork", map[string]any{"model": m, "tools": []string{}})).rest(t) {
		b, _ := json.Marshal(ev)
		leaks("AG-UI", b)
	}
	st := tm.stream(t, testCtx(t), "lin_a-fork", "", nil)
	evs := st.until(t, keel.TypeRunCompleted)
	st.close()
	if evs[0].event != keel.TypeSessionForked || forked(evs[0].envelope(t)) != want {
		t.Errorf("the stream's first event: %+v", evs[0])
	}
	for _, ev := range evs {
		leaks("the event stream", []byte(ev.data))
	}
	leaks("GET .../history", tm.call(t, http.MethodGet, "/v1/sessions/lin_a-fork/history", nil).must(t, http.StatusOK).raw)

	// A fork of the fork: its parent is under the prefix, and whole.
	r = tm.call(t, http.MethodPost, "/v1/sessions/lin_a-fork/fork", map[string]any{"run": 1, "into": "lin_a-ff"}).must(t, http.StatusCreated)
	leaks("POST .../fork", r.raw)
	if p := state(tm, "lin_a-ff").Parent; p == nil || p.Source != "lin_a-fork" || p.Seq == 0 {
		t.Errorf("the fork of the fork's parent: %+v", p)
	}
	// A fork into the ID the other team's fork holds is refused, without
	// saying whose fork it is.
	r = tm.call(t, http.MethodPost, "/v1/sessions/lin_a-ff/fork", map[string]any{"run": 0, "into": "lin_a-fork"}).must(t, http.StatusBadRequest)
	leaks("a refused fork", r.raw)
	leaks("GET .../forks", tm.call(t, http.MethodGet, "/v1/sessions/lin_a-fork/forks", nil).must(t, http.StatusOK).raw)
	leaks("GET /v1/sessions", tm.call(t, http.MethodGet, "/v1/sessions", nil).must(t, http.StatusOK).raw)
	tm.call(t, http.MethodGet, "/v1/sessions/lin_b-src", nil).must(t, http.StatusNotFound)
}

// The page, with a key limited to wlin_a-, shows a fork of another team's
// session as forked from "a session outside this key's prefix", with no
// link, in its lineage and its session.forked line, and nothing on the
// page or in the tab's storage names the source.
func TestWebPageLineageOutsideThePrefix(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a headless Chromium")
	}
	const full, team = "wlin-full-key-0123456789", "wlin-team-key-0123456789"
	s := startGateway(t, gateway.Options{Keys: []gateway.APIKey{{Key: full}, {Key: team, Prefix: "wlin_a-"}}})
	m := model(t, `{"repeat":true,"turns":[{"text":["answer"]}]}`)
	s.send(t, "wlin_b-src", map[string]any{"prompt": "prompt", "model": m, "tools": []string{}})
	waitForEvent(t, testCtx(t), "wlin_b-src", keel.TypeRunCompleted, 1)
	s.call(t, http.MethodPost, "/v1/sessions/wlin_b-src/fork", map[string]any{"run": 1, "into": "wlin_a-fork"}).must(t, http.StatusCreated)

	b := newBrowser(t)
	b.do("load the page", chromedp.Navigate(s.srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#open-form")))
	b.fill("#api-key", team)
	eval[bool](b, `document.getElementById("api-key").dispatchEvent(new Event("change")), true`)
	b.open("wlin_a-fork")
	const outside = "forked from a session outside this key's prefix after run 1"
	poll[bool](b, "lineage without the source", `(() => {
		const l = document.getElementById("lineage");
		const row = document.querySelector('[data-type="session.forked"]');
		return !l.hidden && l.textContent === "`+outside+`" && !l.querySelector("a") &&
			!!row && row.textContent.includes("`+outside+`") && !row.querySelector("a");
	})()`)
	b.screenshot("lineage-outside")
	if eval[bool](b, `document.documentElement.outerHTML.includes("wlin_b-") || JSON.stringify(sessionStorage).includes("wlin_b-")`) {
		t.Fatal("the page names the other team's session")
	}
}

// A child session is named after its parent, so a key limited to
// dlin-team-- covers the child dlin-team--researcher-1-<drawn> of the
// session dlin-team but not the parent. It reads the child's state, whose run is
// its own (the agent, its path and depth, the task), but not which run
// and call of the parent delegated to it, the workflow it reports to, or
// where its deltas are relayed; the parent itself is not found. An
// unlimited key sees the whole delegation (docs/security.md, "Lineage";
// docs/contract.md §21.3).
func TestDelegationLineageOutsideAKeysPrefix(t *testing.T) {
	const full, child = "dlin-full-key-0123456789", "dlin-child-key-0123456789"
	s := startGateway(t, gateway.Options{Keys: []gateway.APIKey{{Key: full}, {Key: child, Prefix: "dlin-team--"}}})
	as := func(key string) *stack { c := *s; c.key = key; return &c }
	delegationScripts(t, "dlin-team")
	shared.gates.open("dlin-team")
	as(full).send(t, "dlin-team", map[string]any{"prompt": "research", "agent": "planner"})
	waitForEvent(t, testCtx(t), "dlin-team", keel.TypeRunCompleted, 1)
	childID := firstChild(t, "dlin-team")

	state := func(key string) api.SessionStatus {
		t.Helper()
		r := as(key).call(t, http.MethodGet, "/v1/sessions/"+childID, nil).must(t, http.StatusOK)
		var st api.SessionStatus
		if err := json.Unmarshal(r.raw, &st); err != nil || st.Delegated == nil {
			t.Fatalf("child state %s (%v)", r.raw, err)
		}
		return st
	}
	whole := state(full).Delegated
	if whole.Parent != "dlin-team" || whole.ParentRun == "" || whole.ToolCallID != "d1" || len(whole.Relay) == 0 {
		t.Fatalf("the unlimited key's view of the delegation: %+v", whole)
	}
	seen := state(child).Delegated
	if seen.Parent != "" || seen.ParentRun != "" || seen.ToolCallID != "" || len(seen.Relay) != 0 {
		t.Errorf("a key limited to the child learns of its parent: %+v", seen)
	}
	if seen.Agent != "researcher" || seen.Path != "researcher-1" || seen.Depth != 1 || seen.Prompt != whole.Prompt {
		t.Errorf("the child's own delegation facts: %+v, want those of %+v", seen, whole)
	}
	if r := as(child).call(t, http.MethodGet, "/v1/sessions/dlin-team", nil); r.status != http.StatusNotFound {
		t.Errorf("the parent through the child's key: %d %s", r.status, r.raw)
	}
}
