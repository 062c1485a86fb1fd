package gateway_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/keelrun/keel/server/gateway"
)

// The page's eval view (docs/evals.md, "On the page"): an eval opened by
// #eval=ID asks for the gateway's key, and with it shows its progress to
// the end, then its report: the totals of both sides, the regression
// first, a histogram with the right counts, and a case ID that is markup
// shown as text; a case's details open with its reasons, answers and
// their diff. An eval opened with the nav's field is cancelled from the
// page (confirmed), one that does not exist says so, typed, and opening
// a session closes the view. Nothing breaks the page's
// Content-Security-Policy.
func TestWebEval(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a headless Chromium")
	}
	b := newBrowser(t)
	const key = "web-eval-key-0123456789"
	// IDs of this run's own: an eval's ID is taken once it ran, and
	// -count reruns the test.
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	id, cancelID := "web-eval-"+run, "web-eval-cancel-"+run
	s := startGateway(t, gateway.Options{APIKeys: []string{key}})
	cand := model(t, `{"repeat":true,"turns":[{"text":["41"]}]}`)
	base := shared.book.Add(t, t.Name()+"-base", `{"repeat":true,"turns":[{"text":["42"]}]}`)
	const hostile = `q <img src=x onerror="window.pwned=1">`
	s.call(t, http.MethodPost, "/v1/evals", map[string]any{"id": id,
		"candidate": map[string]any{"model": cand, "tools": []string{}},
		"baseline":  map[string]any{"model": base, "tools": []string{}},
		"cases": []any{
			map[string]any{"id": "ok", "prompt": "a number", "expect": map[string]any{"contains": []string{"4"}}},
			map[string]any{"id": hostile, "prompt": "6*7?", "expect": map[string]any{"contains": []string{"42"}}},
		}}).must(t, http.StatusAccepted)

	b.do("load the page", chromedp.Navigate(s.srv.URL+"/#eval="+id), chromedp.WaitVisible(chromedp.CSS("#eval")))
	poll[bool](b, "asked for a key", `!document.getElementById("eval-error").hidden &&
		document.getElementById("eval-error").textContent.startsWith("unauthorized")`)
	b.fill("#api-key", key)
	eval[bool](b, `document.getElementById("api-key").dispatchEvent(new Event("change")), true`)
	poll[bool](b, "progress at the end and the report", `(() => {
		const bar = document.getElementById("eval-bar");
		const v = (f) => document.querySelector('#eval-counts [data-field="' + f + '"]')?.dataset.value;
		return document.getElementById("eval-state").dataset.state === "completed" && bar.value === 2 && bar.max === 2 &&
			v("done") === "2" && v("passed") === "1" && v("failed") === "1" && v("running") === "0" &&
			document.getElementById("eval-cancel").hidden && !document.getElementById("eval-report").hidden;
	})()`)
	b.screenshot("report")
	totals := eval[[]string](b, `["pass_rate", "passed", "failed"].flatMap((f) => ["candidate", "baseline"].map((s) =>
		document.querySelector('#eval-totals tr[data-field="' + f + '"] td[data-side="' + s + '"]').textContent))`)
	want := []string{"50.0% (1/2)", "100.0% (2/2)", "1", "2", "1 / 0 / 0", "0 / 0 / 0"}
	if len(totals) != len(want) {
		t.Fatalf("totals %q, want %q", totals, want)
	}
	for i := range want {
		if totals[i] != want[i] {
			t.Fatalf("totals %q, want %q", totals, want)
		}
	}
	rows := eval[[]string](b, `[...document.querySelectorAll("#eval-cases tr.case")].map((r) =>
		r.querySelector(".case-id").textContent + "|" + r.dataset.change + "|" + r.querySelector('td[data-side="candidate"]').dataset.result)`)
	if len(rows) != 2 || rows[0] != hostile+"|regressed|fail" || rows[1] != "ok|same|pass" {
		t.Fatalf("case rows %q: the regression first, its ID as text", rows)
	}
	if eval[bool](b, `!!document.querySelector("#eval img") || window.pwned === 1`) {
		t.Fatal("a case ID was rendered as markup")
	}
	// The failing case scores 0.5: its run completed, its answer lacks "42".
	for _, c := range []struct{ series, bars, table string }{
		{"candidate", "0,0,0,0,0,1,0,0,0,1", "0,0,0,0,0,1,0,0,0,1"},
		{"baseline", "0,0,0,0,0,0,0,0,0,2", "0,0,0,0,0,0,0,0,0,2"},
	} {
		bars := eval[string](b, `[...document.querySelectorAll('#eval-chart rect.bar[data-series="`+c.series+`"]')].map((r) => r.dataset.count).join()`)
		table := eval[string](b, `[...document.querySelectorAll('#eval-chart td[data-series="`+c.series+`"]')].map((td) => td.textContent).join()`)
		if bars != c.bars || table != c.table {
			t.Fatalf("%s histogram: bars %s, table %s, want %s", c.series, bars, table, c.bars)
		}
	}
	if !eval[bool](b, `document.querySelector("#eval-chart svg").getAttribute("aria-label").includes("candidate: 0.0–0.1 0, 0.1–0.2 0, 0.2–0.3 0, 0.3–0.4 0, 0.4–0.5 0, 0.5–0.6 1")`) {
		t.Fatal("the chart's text alternative lacks the counts")
	}
	b.do("open the regression", chromedp.Click(chromedp.CSS("#eval-cases tr.case .case-toggle")))
	poll[bool](b, "its reasons and answers", `(() => {
		const d = document.querySelector("#eval-cases tr.case-detail");
		if (!d || d.hidden || d.dataset.case !== `+jsString(hostile)+`) return false;
		const side = (s) => d.querySelector('.case-side[data-side="' + s + '"]');
		return side("candidate").querySelector(".answer").textContent === "41" &&
			side("baseline").querySelector(".answer").textContent === "42" &&
			side("candidate").querySelector('.scores li[data-pass="false"] .reason')?.textContent.length > 3 &&
			d.querySelector(".answer-diff .del").textContent === "- 42\n" && d.querySelector(".answer-diff .ins").textContent === "+ 41\n";
	})()`)
	b.screenshot("case")

	// An eval whose case waits at a gate that never opens, cancelled
	// from the page.
	gated := shared.book.Add(t, t.Name()+"-gated", `{"turns":[
	  {"tool_calls":[{"id":"g","name":"gate","arguments":{"key":"web-eval-never"}}]},
	  {"text":["done"]}]}`)
	s.call(t, http.MethodPost, "/v1/evals", map[string]any{"id": cancelID,
		"candidate": map[string]any{"model": gated, "tools": []string{"gate"}},
		"cases":     []any{map[string]any{"id": "waits", "prompt": "wait"}}}).must(t, http.StatusAccepted)
	eval[bool](b, `window.violations = 0, document.addEventListener("securitypolicyviolation", () => window.violations++), true`)
	b.fill("#eval-open-id", cancelID)
	b.do("open the second eval", chromedp.Click(chromedp.CSS("#eval-open-form button")))
	poll[bool](b, "running", `document.getElementById("eval-id").textContent === `+jsString(cancelID)+` &&
		location.hash === `+jsString("#eval="+cancelID)+` &&
		document.getElementById("eval-state").dataset.state === "running" &&
		document.querySelector('#eval-counts [data-field="running"]')?.dataset.value === "1" &&
		!document.getElementById("eval-cancel").hidden && document.getElementById("eval-report").hidden`)
	b.screenshot("running")
	eval[bool](b, `window.confirm = () => true, true`)
	b.do("cancel", chromedp.Click(chromedp.CSS("#eval-cancel")))
	poll[bool](b, "cancelled", `document.getElementById("eval-state").dataset.state === "cancelled" &&
		document.getElementById("eval-cancel").hidden && !document.getElementById("eval-report").hidden &&
		document.getElementById("eval-notes").textContent.includes("cancelled") &&
		document.querySelector('#eval-cases tr.case[data-case="waits"] td[data-side="candidate"]')?.dataset.result === "skipped"`)
	b.screenshot("cancelled")
	if n := eval[int](b, `window.violations`); n != 0 {
		t.Fatalf("the view broke the page's Content-Security-Policy %d times", n)
	}
	r := s.call(t, http.MethodGet, "/v1/evals/"+cancelID, nil).must(t, http.StatusOK)
	if r.body["state"] != "cancelled" {
		t.Fatalf("after cancel: %s", r.raw)
	}

	b.fill("#eval-open-id", "web-eval-none")
	b.do("open an eval that does not exist", chromedp.Click(chromedp.CSS("#eval-open-form button")))
	poll[bool](b, "its error", `(() => { const e = document.getElementById("eval-error");
		return document.getElementById("eval-id").textContent === "web-eval-none" && !e.hidden &&
			e.textContent.startsWith("not_found: ") && document.getElementById("eval-report").hidden; })()`)

	b.open("web-eval-session")
	if !eval[bool](b, `document.getElementById("eval").hidden && !location.hash.startsWith("#eval=")`) {
		t.Fatal("opening a session left the eval view open")
	}
}
