package gateway_test

import (
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/keelrun/keel/server/gateway"
)

// The page's schedules view (docs/contract.md §22): a schedule made
// through the API is listed and shown (its prompt as text, never markup);
// "Trigger now" makes a firing, which appears with its run's end and a
// link that opens the session it made; the form creates a schedule,
// Pause and Unpause change its state, Delete (confirmed) removes it; an
// API error is shown, typed.
func TestWebPageSchedules(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a headless Chromium")
	}
	b := newBrowser(t)
	s := startGateway(t, gateway.Options{})
	m := model(t, `{"repeat":true,"turns":[{"text":["the report"]}]}`)
	const hostile = `Report <img src=x onerror="window.pwned=1"> now`
	s.call(t, http.MethodPost, "/v1/schedules", map[string]any{"id": "web-sched", "every": "1h", "prompt": hostile,
		"config": map[string]any{"model": m}}).must(t, http.StatusCreated)
	s.listed(t, "web-sched")

	b.do("load the page", chromedp.Navigate(s.srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#schedules-refresh")))
	poll[bool](b, "schedule listed", `!!document.querySelector('#schedules li[data-schedule="web-sched"]')`)
	b.do("open the schedule", chromedp.Click(chromedp.CSS(`#schedules li[data-schedule="web-sched"] button`)))
	poll[bool](b, "schedule shown", `(() => {
		const d = document.getElementById("schedule-details");
		return !document.getElementById("schedule").hidden && document.getElementById("session").hidden &&
			document.getElementById("schedule-id").textContent === "web-sched" &&
			document.getElementById("schedule-state").dataset.state === "active" &&
			d.querySelector('[data-field="prompt"] dd').textContent === `+jsString(hostile)+` &&
			d.querySelector('[data-field="fires"] dd').textContent.includes("every 1h") &&
			d.querySelector('[data-field="next"] dd').textContent !== "none";
	})()`)
	if eval[bool](b, `!!document.querySelector("#schedule img") || window.pwned === 1`) {
		t.Fatal("the schedule's prompt was rendered as markup")
	}

	b.do("trigger", chromedp.Click(chromedp.CSS("#schedule-trigger")))
	poll[bool](b, "the firing and its run's end", `(() => {
		const f = document.querySelector('#schedule-firings .firing[data-status="sent"][data-run="completed"]');
		return !!f && f.dataset.session === "web-sched" && !!f.querySelector("a.session-link");
	})()`)
	b.screenshot("fired")
	b.do("open the firing's session", chromedp.Click(chromedp.CSS(`#schedule-firings .firing a.session-link`)))
	poll[bool](b, "the session shown", `!document.getElementById("session").hidden && document.getElementById("schedule").hidden &&
		document.getElementById("session-id").textContent === "web-sched" &&
		document.querySelectorAll('[data-type="run.completed"]').length === 1`)

	// A schedule made with the form.
	b.do("new schedule", chromedp.Click(chromedp.CSS("#schedule-add")), chromedp.WaitVisible(chromedp.CSS("#schedule-form")))
	b.fill("#new-id", "web-sched-form")
	b.fill("#new-cron", "0 9 * * 1-5")
	b.fill("#new-timezone", "Europe/Berlin")
	b.fill("#new-prompt", "Morning report.")
	b.fill("#new-model", m)
	eval[bool](b, `document.getElementById("new-new-session").checked = true, true`)
	b.do("create", chromedp.Click(chromedp.CSS("#schedule-form button[type=submit]")))
	poll[bool](b, "created and shown", `document.getElementById("schedule-id").textContent === "web-sched-form" &&
		!document.getElementById("schedule").hidden &&
		document.getElementById("schedule-details").querySelector('[data-field="session"] dd').textContent.includes("a new one each firing") &&
		document.getElementById("schedule-details").querySelector('[data-field="fires"] dd').textContent === "cron 0 9 * * 1-5 in Europe/Berlin"`)
	st := scheduleStatus(t, s.call(t, http.MethodGet, "/v1/schedules/web-sched-form", nil).must(t, http.StatusOK))
	if !st.Schedule.NewSession || st.Schedule.Config == nil || st.Schedule.Config.Model != m {
		t.Fatalf("the form's schedule: %+v", st.Schedule)
	}
	b.do("pause", chromedp.Click(chromedp.CSS("#schedule-pause")))
	poll[bool](b, "paused", `document.getElementById("schedule-state").dataset.state === "paused" &&
		!document.getElementById("schedule-unpause").hidden && document.getElementById("schedule-pause").hidden`)
	b.do("unpause", chromedp.Click(chromedp.CSS("#schedule-unpause")))
	poll[bool](b, "active again", `document.getElementById("schedule-state").dataset.state === "active"`)

	// A schedule whose firings run as one of the worker's agents.
	b.do("new agent schedule", chromedp.Click(chromedp.CSS("#schedule-add")))
	b.fill("#new-id", "web-sched-agent")
	b.fill("#new-every", "1h")
	b.fill("#new-prompt", "Find the facts.")
	b.fill("#new-agent", "researcher")
	b.do("create the agent's", chromedp.Click(chromedp.CSS("#schedule-form button[type=submit]")))
	poll[bool](b, "the agent shown", `document.getElementById("schedule-id").textContent === "web-sched-agent" &&
		document.getElementById("schedule-details").querySelector('[data-field="agent"] dd')?.textContent === "researcher"`)
	st = scheduleStatus(t, s.call(t, http.MethodGet, "/v1/schedules/web-sched-agent", nil).must(t, http.StatusOK))
	if st.Schedule.Config == nil || st.Schedule.Config.Agent != "researcher" || st.Schedule.Config.Model != "" {
		t.Fatalf("the agent's schedule: %+v", st.Schedule.Config)
	}
	s.call(t, http.MethodDelete, "/v1/schedules/web-sched-agent", nil).must(t, http.StatusOK)

	// Refused creations are shown, typed, as text.
	for _, bad := range []struct{ field, value, want string }{
		{"#new-model", "scripted:/etc/passwd", "invalid_input: model"},
		{"#new-agent", "auditor", "invalid_input: agent"},
	} {
		b.do("new schedule again", chromedp.Click(chromedp.CSS("#schedule-add")))
		b.fill("#new-id", "web-sched-bad")
		b.fill("#new-every", "1h")
		b.fill("#new-prompt", "x")
		b.fill(bad.field, bad.value)
		b.do("create a bad one", chromedp.Click(chromedp.CSS("#schedule-form button[type=submit]")))
		poll[bool](b, "error shown", `(() => { const e = document.getElementById("schedule-form-error");
			return !e.hidden && e.textContent.startsWith(`+jsString(bad.want)+`); })()`)
		eval[bool](b, `document.getElementById("schedule-form").reset(), true`)
	}

	// Delete, confirmed.
	b.do("open the form's schedule", chromedp.Click(chromedp.CSS(`#schedules li[data-schedule="web-sched-form"] button`)))
	poll[bool](b, "shown", `document.getElementById("schedule-id").textContent === "web-sched-form"`)
	eval[bool](b, `window.confirm = () => true, true`)
	b.do("delete", chromedp.Click(chromedp.CSS("#schedule-delete")))
	poll[bool](b, "deleted", `document.getElementById("schedule").hidden &&
		!document.querySelector('#schedules li[data-schedule="web-sched-form"]')`)
	if r := s.call(t, http.MethodGet, "/v1/schedules/web-sched-form", nil); r.status != http.StatusNotFound {
		t.Fatalf("after delete: %d %s", r.status, r.raw)
	}
	s.call(t, http.MethodDelete, "/v1/schedules/web-sched", nil).must(t, http.StatusOK)
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	b := []byte{'"'}
	for _, r := range s {
		switch r {
		case '"', '\\':
			b = append(b, '\\', byte(r))
		default:
			b = append(b, string(r)...)
		}
	}
	return string(append(b, '"'))
}
